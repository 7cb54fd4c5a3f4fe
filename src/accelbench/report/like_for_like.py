"""Like for like: whether compared runs served the same thing, and every difference in words.

A comparison ranks hardware only when the runs served the same model the same way and answered alike. This
module reads what each run recorded (``extra["served"]``, ``bench/served_identity.py``; ``extra["quality"]``,
``bench/quality.py``; the run's own ``model`` and ``quantization``) and sets each run beside the baseline:

- a **mismatch** is a field both runs know and on which they differ: the model (its config, tokenizer and chat
  template hashes where readable, else its name), revision, weights precision, KV cache dtype, max model length,
  prefix caching, chunked prefill, speculative decoding, the sampling the client sent, and the quality probe's
  accuracy when the two 95% intervals do not overlap;
- a field one run knows and the other does not is **unverified**, said as such and never counted as equal or
  different; the engine and its version are what a comparison is often about, so they are said, not counted;
- the **greedy agreement** of each run with the baseline (share of identical leading tokens on the probe's
  prompts), where both asked the same prompts.

``check_like_for_like`` puts the verdict on a comparison (``like_for_like``, ``mismatches``,
``like_for_like_notes``) and, unless mismatches are allowed, takes the mismatched runs out of its pairs and
names them in ``left_out``, so no ratio, finding or headline ranks them; with ``allow_mismatch`` they stay
and every note names the difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from accelbench.bench.quality import agreement, same_prompts
from accelbench.bench.served_identity import FIELDS, served_value
from accelbench.domain.results import RunInfo

if TYPE_CHECKING:
    from accelbench.report.comparison import Comparison

#: fields a difference in makes runs unlike; the model's identity is judged apart (``_model_identity``)
COMPARED = (
    "model_revision",
    "weights_precision",
    "kv_cache_dtype",
    "max_model_len",
    "prefix_caching",
    "chunked_prefill",
    "speculative_decoding",
    "sampling",
)
SAID = ("engine", "engine_version")
WORDS = {**FIELDS, "weights_precision": "weights precision", "model": "model", "quality": "quality"}
_HASHES = ("config_hash", "tokenizer_hash", "chat_template_hash")


def _served(run: RunInfo) -> Mapping[str, Any]:
    served = (run.extra or {}).get("served")
    return served if isinstance(served, Mapping) else {}


def field_value(run: RunInfo, name: str) -> Any:
    """What ``run`` recorded for ``name`` (None: unknown). Weights precision is the checkpoint's or launch
    command's quantization, else the precision the run record names, else the launch command's dtype."""
    served = _served(run)
    if name == "weights_precision":
        for value in (
            served_value(served, "quantization"),
            run.quantization,
            served_value(served, "weights_dtype"),
        ):
            if value is not None:
                return str(value)
        return None
    if name == "model_revision":
        return served_value(served, name) or run.model_revision
    if name == "engine":
        return served_value(served, name) or run.engine
    if name == "engine_version":
        return served_value(served, name) or run.engine_version
    return served_value(served, name)


def show_value(value: Any) -> str:
    """A served field's value in words (the run page and the mismatch sentences say it the same way)."""
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {show_value(v)}" for k, v in value.items())
    return str(value)


def _sentence(field: str, name: str, value: Any, base_name: str, base: Any) -> str:
    if field == "weights_precision":
        return f"{name} serves {show_value(value)} weights, {base_name} {show_value(base)}"
    if field == "model":
        return f"{name} serves {show_value(value)}, {base_name} {show_value(base)}"
    return f"{name}'s {WORDS.get(field, field)} is {show_value(value)}, {base_name}'s {show_value(base)}"


def _model_identity(run: RunInfo, base: RunInfo) -> tuple[str, Any, Any] | None:
    """The first model identity both runs know and on which they differ: the files' hashes, else the name."""
    a, b = _served(base), _served(run)
    known = False
    for h in _HASHES:
        va, vb = served_value(a, h), served_value(b, h)
        if va is not None and vb is not None:
            known = True
            if va != vb:
                return h, vb, va
    if known:
        return None
    na, nb = base.model or base.served_model, run.model or run.served_model
    if na and nb and na != nb:
        return "model", nb, na
    return None


def _quality(run: RunInfo) -> Mapping[str, Any] | None:
    q = (run.extra or {}).get("quality")
    return q if isinstance(q, Mapping) and q.get("accuracy_ci95") and not q.get("error") else None


def _quality_words(q: Mapping[str, Any]) -> str:
    lo, hi = q["accuracy_ci95"]
    return f"{q.get('correct')} of {q.get('tasks')} right ({(q.get('accuracy') or 0):.0%}, 95% CI {lo:.0%}-{hi:.0%})"


def quality_mismatch(run: RunInfo, base: RunInfo) -> tuple[str, str] | None:
    """(value, baseline) in words when both ran the same quality measure and their 95% intervals do not
    overlap; None otherwise."""
    qa, qb = _quality(base), _quality(run)
    if qa is None or qb is None or qa.get("source") != qb.get("source") or qa.get("tasks") != qb.get("tasks"):
        return None
    (alo, ahi), (blo, bhi) = qa["accuracy_ci95"], qb["accuracy_ci95"]
    if blo > ahi or alo > bhi:
        return _quality_words(qb), _quality_words(qa)
    return None


def greedy_agreement(run: RunInfo, base: RunInfo) -> float | None:
    """The share of identical leading tokens of ``run``'s probe answers and the baseline's (same prompts)."""
    qa, qb = (base.extra or {}).get("quality"), (run.extra or {}).get("quality")
    if not isinstance(qa, Mapping) or not isinstance(qb, Mapping) or not same_prompts(qa, qb):
        return None
    return agreement(qb["answers"], qa["answers"])


def mismatches_of(run: RunInfo, name: str, base: RunInfo, base_name: str) -> list[dict[str, Any]]:
    """Every known difference of ``run`` from the baseline, each with its sentence."""
    found: list[dict[str, Any]] = []

    def add(field: str, base_value: Any, value: Any, text: str) -> None:
        found.append({"run": run.id, "field": field, "baseline": base_value, "value": value, "text": text})

    ident = _model_identity(run, base)
    if ident is not None:
        field, value, base_value = ident
        text = _sentence("model", name, value, base_name, base_value)
        if field != "model":
            text = f"{name}'s {WORDS[field]} differs from {base_name}'s ({value} against {base_value})"
        add(field, base_value, value, text)
    for field in COMPARED:
        value, base_value = field_value(run, field), field_value(base, field)
        if value is not None and base_value is not None and value != base_value:
            add(field, base_value, value, _sentence(field, name, value, base_name, base_value))
    q = quality_mismatch(run, base)
    if q is not None:
        add("quality", q[1], q[0], f"{name} answers {q[0]}, {base_name} {q[1]}: the intervals do not overlap")
    return found


def _unverified(run: RunInfo, name: str, base: RunInfo, base_name: str) -> list[str]:
    out = []
    for field in COMPARED:
        value, base_value = field_value(run, field), field_value(base, field)
        if (value is None) != (base_value is None):
            who = name if value is None else base_name
            out.append(f"{who}'s {WORDS[field]}")
    return out


def like_for_like(runs: Sequence[RunInfo], names: Sequence[str]) -> dict[str, Any]:
    """Every run beside the first (the baseline): ``like_for_like``, ``mismatches`` (each with ``run``,
    ``field``, ``baseline``, ``value`` and ``text``), ``agreement`` per run, and ``notes`` in words."""
    if not runs:
        return {"like_for_like": True, "mismatches": [], "agreement": {}, "notes": []}
    base, base_name = runs[0], names[0]
    mismatches: list[dict[str, Any]] = []
    notes: list[str] = []
    shares: dict[str, float | None] = {}
    for run, name in zip(runs[1:], names[1:], strict=True):
        found = mismatches_of(run, name, base, base_name)
        mismatches.extend(found)
        unknown = _unverified(run, name, base, base_name)
        if unknown:
            notes.append(
                f"Not verified between {name} and {base_name} (unknown): " + ", ".join(unknown) + "."
            )
        shares[run.id] = share = greedy_agreement(run, base)
        if share is not None:
            notes.append(
                f"{name} agrees with {base_name} on {share:.0%} of the leading greedy tokens of the probe."
            )
        said = [
            f"{WORDS[f]} {show_value(field_value(run, f))} against {show_value(field_value(base, f))}"
            for f in SAID
            if field_value(run, f) is not None
            and field_value(base, f) is not None
            and field_value(run, f) != field_value(base, f)
        ]
        if said:
            notes.append(f"{name} runs a different engine build from {base_name}: " + "; ".join(said) + ".")
    if mismatches:
        notes.insert(0, "Not like for like: " + "; ".join(m["text"] for m in mismatches) + ".")
    return {"like_for_like": not mismatches, "mismatches": mismatches, "agreement": shares, "notes": notes}


def check_like_for_like(cmp: Comparison, runs: Sequence[RunInfo], *, allow_mismatch: bool = False) -> None:
    """Put the verdict on ``cmp`` (``like_for_like``, ``mismatches``, ``like_for_like_notes``) and, unless
    ``allow_mismatch``, take the mismatched runs out of its pairs so no ratio or finding ranks them."""
    names = [cmp.run(r.id).name for r in runs]
    verdict = like_for_like(runs, names)
    cmp.like_for_like = verdict["like_for_like"]
    cmp.mismatches = verdict["mismatches"]
    notes = list(verdict["notes"])
    unlike = {m["run"] for m in verdict["mismatches"]}
    if unlike and not allow_mismatch:
        cmp.pairs = [p for p in cmp.pairs if p.b not in unlike]
        cmp.left_out = sorted(unlike)
        left_out = [n for r, n in zip(runs, names, strict=True) if r.id in unlike]
        notes.append(
            "Left out of the ratios and findings: "
            + ", ".join(left_out)
            + " (not like for like with the baseline; --allow-mismatch keeps them, each difference named)."
        )
    elif unlike:
        notes.append(
            "Mismatched runs kept in the ratios (--allow-mismatch): each ratio compares the differences too."
        )
    cmp.like_for_like_notes = notes


def like_for_like_lines(cmp: Comparison) -> list[str]:
    """What a comparison says first: whether its runs are like for like, then each note in words."""
    if len(cmp.runs) < 2:
        return []
    head = (
        "Like for like: yes, no recorded difference from the baseline in what was served or in quality."
        if cmp.like_for_like
        else f"Like for like: no, {len(cmp.mismatches)} difference(s) from the baseline."
    )
    return [head, *cmp.like_for_like_notes]


def row_difference(cmp: Comparison, run_id: str) -> str:
    """What a table or CSV row of ``run_id`` carries: its differences from the baseline, "baseline", or ""."""
    if run_id == cmp.baseline:
        return "baseline"
    return "; ".join(m["text"] for m in cmp.mismatches if m["run"] == run_id)
