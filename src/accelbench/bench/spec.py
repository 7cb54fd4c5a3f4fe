"""Sweep spec files: strict YAML loading, readable errors that name the key, and spec comparison for resume.

A sweep spec file holds the keys of ``SweepSpec`` (the matrix and the load settings) at its top level, and
optionally ``label`` and a ``server`` section (base URL, served model, tokenizer, headers)::

    input_lens: [128, 512]
    concurrency: [1, 4, 8]
    repeats: 3
    output_len: 128
    prompts_per_concurrency: 10
    endpoint: chat            # chat or completions
    server:
      base_url: http://127.0.0.1:8000
      served_model: smol

Unknown keys are errors (``concurency: 8`` must not silently run the default), and so are wrong types; each
error names the key path and, for a misspelling, the key that was probably meant.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError

from accelbench.bench.prompts import check_dataset
from accelbench.bench.schedule import SCHEDULES
from accelbench.domain.run import SweepSpec
from accelbench.domain.strict import StrictModel
from accelbench.errors import UserInputError, plain_words
from accelbench.registry import did_you_mean


class SpecServer(StrictModel):
    """The server a spec file points at; command-line flags override it. API keys belong in flags or the
    environment, never in a file that gets shared."""

    base_url: str | None = Field(default=None, description="Server root, e.g. http://127.0.0.1:8000.")
    served_model: str | None = Field(default=None, description="The model name the server answers to.")
    tokenizer: str | None = Field(default=None, description="Local tokenizer directory.")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers.")


class SweepFile(SweepSpec):
    """The shape of a sweep spec file: ``SweepSpec`` plus an optional label and server section."""

    label: str | None = Field(default=None, description="A name for the run.")
    server: SpecServer | None = Field(default=None, description="The server to measure.")

    def sweep_spec(self) -> SweepSpec:
        """The matrix and load settings alone (what a run stores and resume compares)."""
        return SweepSpec.model_validate(self.model_dump(exclude={"label", "server"}))


def _allowed_keys(model: type[BaseModel]) -> list[str]:
    keys = []
    for name, info in model.model_fields.items():
        keys.append(info.alias or name)
    return keys


def describe_validation_error(exc: ValidationError, source: str, model: type[BaseModel]) -> UserInputError:
    """A ``UserInputError`` naming each offending key (with a did-you-mean for unknown ones) of ``model``."""
    lines = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        where = ".".join(loc) or "(top level)"
        if err["type"] == "extra_forbidden":
            # find the model the unknown key sits in, to suggest its real keys
            parent: type[BaseModel] = model
            for part in loc[:-1]:
                field = parent.model_fields.get(part)
                ann = field.annotation if field else None
                inner = [
                    a
                    for a in getattr(ann, "__args__", (ann,))
                    if isinstance(a, type) and issubclass(a, BaseModel)
                ]
                if not inner:
                    break
                parent = inner[0]
            known = _allowed_keys(parent)
            close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
            msg = f"unknown key {where!r}"
            if close:
                msg += f" (did you mean {'.'.join([*loc[:-1], close[0]])!r}?)"
            lines.append(msg)
        else:
            got = err.get("input")
            shown = repr(got)
            if len(shown) > 60:
                shown = type(got).__name__
            words = plain_words(err, with_input=False)
            lines.append(f"{where}{' ' if words.startswith('must ') else ': '}{words} (got {shown})")
    unknown = any(e["type"] == "extra_forbidden" for e in exc.errors())
    what = "run spec" if model.__name__ == "RunSpec" else "sweep settings"
    return UserInputError(
        f"Invalid {what} in {source}: " + "; ".join(lines) + ".",
        hint="Allowed top-level keys: " + ", ".join(sorted(_allowed_keys(model))) if unknown else None,
    )


def parse_sweep_file(data: Any, source: str = "<spec>") -> SweepFile:
    """Validate a parsed spec mapping (e.g. from YAML) into a ``SweepFile``; errors name the key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserInputError(
            f"Invalid sweep spec {source}: the top level must be a mapping of keys, not {type(data).__name__}."
        )
    try:
        spec = SweepFile.model_validate(data)
    except ValidationError as exc:
        raise describe_validation_error(exc, source, SweepFile) from None
    if spec.schedule not in SCHEDULES:
        unknown = did_you_mean(spec.schedule, SCHEDULES, "load schedule")
        raise UserInputError(f"Invalid sweep spec {source}: schedule: {unknown.message}", hint=unknown.hint)
    check_dataset(spec.dataset, f"Invalid sweep spec {source}: dataset")
    return spec


def load_sweep_file(path: str | Path) -> SweepFile:
    """Read and validate a YAML sweep spec file."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise UserInputError(f"Sweep spec {p} does not exist.") from None
    except OSError as exc:
        raise UserInputError(f"Cannot read sweep spec {p}: {exc.strerror or exc}.") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise UserInputError(f"Sweep spec {p} is not valid YAML{where}: {problem}.") from None
    return parse_sweep_file(data, str(p))


def spec_differences(stored: SweepSpec, given: SweepSpec) -> list[str]:
    """Keys whose values differ between two specs, as ``"key: stored -> given"`` lines (empty when equal)."""
    a = stored.model_dump(mode="json")
    b = given.model_dump(mode="json")
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
