"""Every option of the measure commands (``bench``, ``sweep``, ``capacity``) made from a model field.

A command lists ``Group``s: a model and, for each field it shows, a ``Flag`` (its declarations and what the
field cannot say itself); ``command`` makes the typer command's signature from them (typer reads
``__signature__``): the option's type, default, help (the field's description), range (its ``ge``/``le``) and
env var come from the field, so a setting added to a model with its flag is an option of every command that
shows that model. The command's body receives what was given (``Given``) and builds one request model.

The load flags are the fields of ``LoadSettings`` (domain/load.py), one name each (``LOAD_FLAGS``).
``bench`` takes the field's default as the flag's; ``sweep`` leaves an unset flag as None (a ``Group`` with
``unset``), so that a spec file or the resumed run can supply the value, and its help shows the default it
falls back to (the ``SweepSpec`` field's, which may differ: a sweep warms the server up by default) as
``[default: X]``. Bounds the CLI cannot express (``gt``: strictly positive) are checked by the model when the
command builds its config, with the same error either way.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Literal, TypeVar, get_args, get_origin

import annotated_types
import typer
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticUndefined

from accelbench.domain.load import GoodputSLO, LengthDist, LoadSettings, LoadStage
from accelbench.errors import UserInputError
from accelbench.services.bench_run import dataset_names

#: LoadSettings field -> its flag declarations (a bool field gets its on/off pair)
LOAD_FLAGS: dict[str, tuple[str, ...]] = {
    "endpoint": ("--endpoint",),
    "dataset": ("--dataset",),
    "dataset_path": ("--dataset-path",),
    "output_len": ("--output-len",),
    "prefix_len": ("--prefix-len",),
    "request_rate": ("--request-rate",),
    "burstiness": ("--burstiness",),
    "num_warmups": ("--num-warmups",),
    "ignore_eos": ("--ignore-eos/--no-ignore-eos",),
    "timeout_s": ("--timeout",),
    "seed": ("--seed",),
    "temperature": ("--temperature",),
    "scrape_metrics": ("--scrape/--no-scrape",),
    "scrape_interval_s": ("--scrape-interval",),
    "prefix_groups": ("--prefix-groups",),
    "turns": ("--turns",),
    "think_time_s": ("--think-time",),
    "ramp_up_s": ("--ramp-up",),
    "time_scale": ("--time-scale",),
    "trace_format": ("--trace-format",),
    "tools": ("--tools",),
    "metrics_definition": ("--metrics-definition",),
    "self_test": ("--self-test/--no-self-test",),
    "max_error_rate": ("--max-error-rate",),
}
#: LoadSettings fields with a flag of their own shape (parsed lists) or on one command only, and why
NOT_SHARED = {
    "goodput": "--goodput NAME:MS pairs, parsed by both commands with one parser (parse_goodput, here)",
    "duration_s": "bench only: a sweep's cells are sized by prompts, not time",
    "stages": "bench and sweep (a capacity search sets each level's load itself): --stages, parse_stages (here)",
    "input_dist": "--input-dist KIND[:KEY=VALUE,...], parsed by parse_dist (here)",
    "output_dist": "--output-dist KIND[:KEY=VALUE,...], parsed by parse_dist (here)",
}

DIST_HELP = (
    "How {what} lengths vary around {around}: fixed, uniform[:range_ratio=R], normal[:std=TOKENS] or "
    "lognormal[:sigma=S], each optionally with min=N,max=N (e.g. normal:std=64,min=16,max=2048)."
)


def parse_dist(text: str | None, flag: str) -> LengthDist | None:
    """``--input-dist``/``--output-dist``: KIND[:KEY=VALUE,...] into a ``LengthDist`` (None when not given)."""
    if text is None:
        return None
    kind, _, rest = text.strip().partition(":")
    fields: dict[str, Any] = {"kind": kind.strip().lower()}
    for part in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise UserInputError(
                f"{flag} {text!r}: {part!r} is not KEY=VALUE.",
                hint=DIST_HELP.format(what="the", around="the mean"),
            )
        fields[key.strip()] = value.strip()
    try:
        return LengthDist.model_validate(fields)
    except ValidationError as exc:
        say = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())
        raise UserInputError(
            f"{flag} {text!r}: {say}.", hint=DIST_HELP.format(what="the", around="the mean")
        ) from None


STAGES_HELP = (
    "A load plan instead of one load: comma-separated stages c=CONCURRENCY:SECONDS or r=RATE:SECONDS, each "
    "optionally /RAMP_SECONDS (e.g. c=1:30,c=4:60/20,c=8:60); num_prompts caps the requests."
)


def parse_stages(text: str | None) -> list[LoadStage] | None:
    """``--stages``: c=N:SECONDS[/RAMP] or r=RATE:SECONDS[/RAMP], comma-separated."""
    if not text:
        return None
    out: list[LoadStage] = []
    for k, part in enumerate(filter(None, (x.strip() for x in text.split(",")))):
        m = re.fullmatch(r"([cr])=([0-9.]+):([0-9.]+)(?:/([0-9.]+))?", part)
        if m is None:
            raise UserInputError(
                f"--stages: stage {k + 1} {part!r} is not c=N:SECONDS or r=RATE:SECONDS.", hint=STAGES_HELP
            )
        kind, level, duration, ramp = m.groups()
        fields: dict[str, Any] = {"duration_s": duration, "ramp_up_s": ramp or 0}
        fields["concurrency" if kind == "c" else "request_rate"] = level
        try:
            out.append(LoadStage.model_validate(fields))
        except ValidationError as exc:
            say = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'stage'}: {e['msg']}" for e in exc.errors())
            raise UserInputError(f"--stages: stage {k + 1} {part!r}: {say}.", hint=STAGES_HELP) from None
    return out


_GOODPUT = re.compile(r"^(ttft|tpot|e2el):([0-9]*\.?[0-9]+)$")


def is_goodput_pair(text: str) -> bool:
    return _GOODPUT.match(text) is not None


def parse_goodput(items: list[str]) -> GoodputSLO | None:
    """``["ttft:500", "tpot:50"]`` (also comma- or space-separated in one item) -> GoodputSLO, in ms."""
    values: dict[str, float] = {}
    for item in items:
        for part in re.split(r"[,\s]+", item.strip()):
            if not part:
                continue
            m = _GOODPUT.match(part)
            if not m:
                raise UserInputError(
                    f"Bad --goodput item {part!r}.",
                    hint="Give NAME:MS pairs with NAME one of ttft, tpot, e2el, e.g. --goodput ttft:500 tpot:50.",
                )
            values[f"{m.group(1)}_ms"] = float(m.group(2))
    return GoodputSLO(**values) if values else None


def bounds(model: type[BaseModel], field: str) -> tuple[Any, Any]:
    """The ``ge``/``le`` of a field (typer's ``min``/``max``); None where it has none."""
    low = high = None
    for meta in model.model_fields[field].metadata:
        if isinstance(meta, annotated_types.Ge):
            low = meta.ge
        elif isinstance(meta, annotated_types.Le):
            high = meta.le
    return low, high


def shown_default(value: Any) -> str:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return str(value)


# ------------------------------------------------------------------ every option from a model field
_FIELD: Any = object()  # "as the model field says"


@dataclass(frozen=True)
class Flag:
    """How one model field is typed on the command line: its declarations, and what the field cannot say
    itself. Everything else (type, default, help, bounds) is the field's."""

    decls: tuple[str, ...]
    help: str | None = None  # the field's description unless the typed text needs its own words
    show_default: str | bool | None = None  # None: the field's default when the group leaves it unset
    envvar: str | None = None
    typed: Any = None  # what is typed, when it is text a parser reads into the field's type
    parse: Callable[[Any], Any] | None = None  # the typed value -> the field's value (None stays None)
    callback: Callable[[Any], Any] | None = None
    hidden: bool = False
    argument: bool = False  # a positional argument instead of an option
    metavar: str | None = None
    minimum: Any = _FIELD  # the field's ``ge`` unless given
    maximum: Any = _FIELD  # the field's ``le`` unless given

    def but(self, **how: Any) -> Flag:
        """This flag with ``how`` changed (a command that shows it another way)."""
        return replace(self, **how)


def flag(*decls: str, **how: Any) -> Flag:
    return Flag(decls=decls, **how)


def dist_flag(name: str, what: str, around: str) -> Flag:
    """``--input-dist``/``--output-dist``: KIND[:KEY=VALUE,...] read into a ``LengthDist``."""
    return flag(
        name, typed=str, help=DIST_HELP.format(what=what, around=around), parse=lambda t: parse_dist(t, name)
    )


#: the workload's shape, which every load command (bench, sweep, capacity) takes in this order
WORKLOAD_FLAGS = (
    "prefix_len",
    "prefix_groups",
    "turns",
    "think_time_s",
    "ramp_up_s",
    "time_scale",
    "trace_format",
    "tools",
    "metrics_definition",
)


def load_flags(*fields: str, **own: Flag) -> dict[str, Flag]:
    """The shared load flags of ``fields`` (``LOAD_FLAGS``), with ``own`` flags of a command added or replacing."""
    out = {f: Flag(decls=LOAD_FLAGS[f]) for f in fields}
    if "dataset" in out:  # the names registered when the command is made; the use case checks a name given
        words = LoadSettings.model_fields["dataset"].description
        out["dataset"] = out["dataset"].but(help=f"{words} Choices: {', '.join(dataset_names())}.")
    return out | own


@dataclass(frozen=True)
class Group:
    """The flags one model's fields make, in the order shown. ``unset``: every flag defaults to None so a
    spec file or a resumed run can supply the value, and the help shows the default the model falls back to."""

    name: str
    model: type[BaseModel]
    flags: Mapping[str, Flag]
    unset: bool = False
    show_defaults: bool = False  # typer's own ``[default: X]`` for every flag that does not say otherwise


def _typed(annotation: Any) -> Any:
    """The type typer parses: a ``Literal`` of strings is typed as text and checked by the model."""
    if get_origin(annotation) is Literal:
        return str
    args = get_args(annotation)
    if args and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return _typed(rest[0]) | None
    return annotation


def _typed_default(fl: Flag, default: Any) -> Any:
    """A flag typed as text a parser reads starts empty (the field's default applies); others start at it."""
    if fl.typed is None:
        return default
    return [] if fl.typed == list[str] else None


def _shown(group: Group, field: str, fl: Flag, default: Any) -> str | bool:
    if fl.show_default is not None:
        return fl.show_default
    if not group.unset:
        return group.show_defaults
    if default is None or default is PydanticUndefined or default == [] or fl.typed is not None:
        return False
    if isinstance(default, bool) and "/" in fl.decls[0]:  # a flag pair's default is the flag in force
        on, _, off = fl.decls[0].partition("/")
        return on if default else off
    return shown_default(default)


def _parameter(group: Group, field: str, fl: Flag) -> inspect.Parameter:
    info = group.model.model_fields[field]
    default = info.get_default(call_default_factory=True)
    annotation = fl.typed if fl.typed is not None else _typed(info.annotation)
    if group.unset and default is not None:
        annotation = annotation | None
    low, high = bounds(group.model, field)
    if fl.argument:
        param: Any = typer.Argument(None, hidden=fl.hidden, metavar=fl.metavar)
    else:
        param = typer.Option(
            None if group.unset else _typed_default(fl, default),
            *fl.decls,
            help=info.description if fl.help is None else fl.help,
            envvar=fl.envvar,
            min=low if fl.minimum is _FIELD else fl.minimum,
            max=high if fl.maximum is _FIELD else fl.maximum,
            show_default=_shown(group, field, fl, default),
            callback=fl.callback,
            hidden=fl.hidden,
        )
    if info.is_required() and not group.unset:
        param.default = ...
    return inspect.Parameter(field, inspect.Parameter.KEYWORD_ONLY, default=param, annotation=annotation)


M = TypeVar("M", bound=BaseModel)


@dataclass
class Given:
    """What one command line gave, by group, read inside the command (where a refusal is worded for the user):
    ``fields`` and ``model`` parse typed text into the fields' values."""

    groups: Sequence[Group]
    typed: dict[str, Any]
    context: typer.Context | None = None

    def values(self, group: str) -> dict[str, Any]:
        """Every field of ``group`` (the groups of that name), parsed (None where the command line left it unset)."""
        out = {}
        for g in self.groups:
            for field, fl in g.flags.items() if g.name == group else ():
                value = self.typed[field]
                out[field] = fl.parse(value) if fl.parse is not None and value is not None else value
        return out

    def fields(self, group: str) -> dict[str, Any]:
        """The fields of ``group`` the command line set (the rest is left to the model, a spec file or a run)."""
        return {k: v for k, v in self.values(group).items() if v is not None}

    def model(self, group: str, model: type[M]) -> M:
        """``group``'s values as ``model`` (validated: a refusal names the flag)."""
        return model.model_validate(self.values(group))


def command(
    *groups: Group, context: bool = False
) -> Callable[[Callable[[Given], None]], Callable[..., None]]:
    """A typer command whose options are the fields of ``groups``' models: the function typer calls has a
    signature made from the fields (typer reads ``__signature__``) and hands ``body`` what was given. A
    setting added to a model as a field with a flag is an option of every command that shows that model."""
    params = [_parameter(g, f, fl) for g in groups for f, fl in g.flags.items()]
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"two groups declare one field: {sorted({n for n in names if names.count(n) > 1})}")
    if context:
        params.insert(0, inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))

    def wrap(body: Callable[[Given], None]) -> Callable[..., None]:
        def run(**typed: Any) -> None:
            ctx = typed.pop("ctx", None)
            body(Given(groups, typed, ctx))

        run.__name__ = run.__qualname__ = body.__name__
        run.__doc__ = body.__doc__
        run.__module__ = body.__module__
        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return run

    return wrap
