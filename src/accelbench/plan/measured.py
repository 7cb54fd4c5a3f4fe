"""Which stored runs measured the model being estimated: an instance is "measured" for an estimate only where
the same model was measured on it; runs of other models on it are named as such, never counted as this one.

The caller reads the runs (``services.plan.plan_context`` from ``Store.measured_models``: instance type ->
the names each measured run goes by, its model and the name it was served under); the planner never opens a
store. A run's model is written as it was given (a preset name, a hub id, a local directory or file), so
names are compared without case and by their last path part as well ("Qwen/Qwen2.5-7B-Instruct" and
"/models/qwen2.5-7b-instruct" are the preset qwen2.5-7b-instruct)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from accelbench.domain.model import ModelSpec

#: instance type -> one tuple of names per measured run (its model, the name it was served under)
MeasuredRuns = Mapping[str, Sequence[Sequence[str]]]


def _last(name: str) -> str:
    """A name's last path part, lower-case, without a trailing slash."""
    return name.strip().rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1].lower()


def _forms(name: str) -> set[str]:
    """A name and its last path part, lower-case, without a trailing slash."""
    text = name.strip().rstrip("/\\").lower()
    return {text, _last(text)} if text else set()


def model_names(model: ModelSpec) -> set[str]:
    """Every spelling a run of ``model`` may carry: its short name, what the user gave, its hub id."""
    out: set[str] = set()
    for name in (model.name, model.ref, model.hf_id):
        if name:
            out |= _forms(name)
    return out


def same_model(model: ModelSpec, names: Iterable[str]) -> bool:
    """Whether a run known by ``names`` (its model, its served name) measured ``model``."""
    own = model_names(model)
    return any(_forms(n) & own for n in names if n)


@dataclass(frozen=True)
class Attribution:
    """What the store measured on one instance, for one model's estimate."""

    measured: bool = False  # a run of this model on this instance
    other_models: list[str] = field(default_factory=list)  # models of the other runs there, as stored


def attribution(model: ModelSpec, instance: str, runs: MeasuredRuns | None) -> Attribution:
    """Whether ``model`` was measured on ``instance``, and which other models were."""
    if not runs:
        return Attribution()
    measured = False
    others: dict[str, str] = {}
    for names in runs.get(instance, ()):
        if same_model(model, names):
            measured = True
        elif names:
            first = str(names[0]).strip()
            others.setdefault(_last(first), first)
    return Attribution(measured=measured, other_models=sorted(others.values(), key=str.lower))


def attribution_note(model: ModelSpec, instance: str, found: Attribution) -> str | None:
    """The estimate's sentence about it (None when the store measured nothing there)."""
    if found.measured:
        return f"Measured: the store has runs of {model.name} on {instance}."
    if found.other_models:
        return (
            f"Not measured for {model.name} on {instance}: the store's runs there are of "
            f"{', '.join(found.other_models)}."
        )
    return None
