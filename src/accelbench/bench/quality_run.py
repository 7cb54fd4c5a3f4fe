"""The quality setting of a run and the step that measures it: the built-in probe or an lm-evaluation-harness task.

``parse_quality`` reads what a user writes (``--quality``, a run spec's ``quality:``, the API field):
``probe`` (the built-in task set, ``bench/quality.py``), ``probe:N`` (N tasks) or ``lm-eval:TASK`` (that task of
lm-evaluation-harness, through its OpenAI-compatible client against the same endpoint; refused with the reason
when the package is not installed). ``measure_quality`` runs it before the load, finds a reference run of the same
model that asked the same prompts (the oldest such run among the newest stored ones) for the greedy agreement,
and stores the result in the run's ``extra["quality"]``.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from typing import Any

from accelbench.bench.quality import DEFAULT_TASKS, MAX_TASKS, agreement, run_probe, same_prompts, scored
from accelbench.bench.recorder import RunNotes
from accelbench.bench.served_identity import record_served, sampling_of
from accelbench.domain.endpoint import Endpoint
from accelbench.errors import UserInputError

log = logging.getLogger(__name__)

LM_EVAL_LIMIT = 100
_METRICS = ("acc,none", "exact_match,strict-match", "exact_match,flexible-extract", "exact_match,none")


@dataclass(frozen=True)
class QualitySetting:
    """What quality measurement a run asked for."""

    source: str  # "probe" or "lm-eval"
    tasks: int = DEFAULT_TASKS
    lm_task: str | None = None

    def label(self) -> str:
        return f"lm-eval:{self.lm_task}" if self.source == "lm-eval" else f"probe:{self.tasks}"


def lm_eval_installed() -> bool:
    """Whether lm-evaluation-harness can be imported here."""
    return importlib.util.find_spec("lm_eval") is not None


def parse_quality(value: str | None) -> QualitySetting | None:
    """``probe`` | ``probe:N`` | ``lm-eval:TASK`` -> the setting; None for none; a typed refusal otherwise."""
    if value is None or not value.strip() or value.strip().lower() in {"off", "none", "false"}:
        return None
    text = value.strip()
    name, _, arg = text.partition(":")
    if name == "probe":
        if not arg:
            return QualitySetting("probe")
        if not arg.isdigit() or not 1 <= int(arg) <= MAX_TASKS:
            raise UserInputError(f"Bad quality setting {text!r}: probe:N takes N from 1 to {MAX_TASKS}.")
        return QualitySetting("probe", tasks=int(arg))
    if name == "lm-eval":
        if not arg.strip():
            raise UserInputError("lm-eval needs a task name: lm-eval:TASK, e.g. lm-eval:gsm8k.")
        if not lm_eval_installed():
            raise UserInputError(
                f"--quality {text}: lm-evaluation-harness is not installed in this environment.",
                hint="Install it (pip install lm-eval) with its task data available, or use --quality probe.",
            )
        return QualitySetting("lm-eval", lm_task=arg.strip())
    raise UserInputError(
        f"Unknown quality setting {text!r}.",
        hint="Use probe, probe:N or lm-eval:TASK (e.g. --quality probe).",
    )


def lm_eval_score(results: dict[str, Any], task: str) -> dict[str, Any]:
    """The run's ``quality`` JSON from lm-evaluation-harness's ``simple_evaluate`` results for ``task``: its
    accuracy-type metric (``acc``, else ``exact_match``) over the samples it scored, with the Wilson interval."""
    metrics = (results.get("results") or {}).get(task)
    if not isinstance(metrics, dict):
        raise UserInputError(f"lm-evaluation-harness returned no result for task {task!r}.")
    metric = next((m for m in _METRICS if isinstance(metrics.get(m), int | float)), None)
    if metric is None:
        raise UserInputError(
            f"lm-evaluation-harness's task {task!r} reports no accuracy or exact-match metric "
            f"(it reports {', '.join(sorted(metrics)) or 'nothing'})."
        )
    samples = (results.get("n-samples") or {}).get(task) or {}
    n = int(samples.get("effective") or samples.get("original") or 0)
    if n <= 0:
        raise UserInputError(f"lm-evaluation-harness scored no sample of task {task!r}.")
    value = float(metrics[metric])
    out = scored(n, round(value * n))
    out.update(
        accuracy=round(value, 4),
        by_task={
            task: {"tasks": n, "correct": round(value * n), "accuracy": round(value, 4), "metric": metric}
        },
        source=f"lm-eval:{task}",
        agreement=None,
        reference_run=None,
    )
    return out


def run_lm_eval(endpoint: Endpoint, task: str, *, limit: int = LM_EVAL_LIMIT) -> dict[str, Any]:
    """Run lm-evaluation-harness's ``task`` (at most ``limit`` samples) against ``endpoint``'s chat route."""
    import lm_eval  # heavy and optional: only for an lm-eval task, which parse_quality checked is installed

    root = endpoint.base_url.rstrip("/").removesuffix("/v1")
    args = f"model={endpoint.served_model},base_url={root}/v1/chat/completions,num_concurrent=4,max_retries=1"
    try:
        results = lm_eval.simple_evaluate(
            model="local-chat-completions",
            model_args=args,
            tasks=[task],
            limit=limit,
            apply_chat_template=True,
        )
    except Exception as exc:  # its data missing, a task it does not know: said, never a crash of the run
        raise UserInputError(
            f"lm-evaluation-harness could not run task {task!r}: {type(exc).__name__}: {exc}"
        ) from None
    out = lm_eval_score(results or {}, task)
    out["limit"] = limit
    return out


def find_reference(store: RunNotes, run_id: str, result: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The oldest of the newest stored runs of the same model whose probe asked the same prompts."""
    run = store.get_run(run_id)
    name = run.model or run.served_model
    if not name:
        return None
    runs, _ = store.list_runs(model=name, limit=50)
    found = None
    for other in runs:  # newest first: the last match is the oldest
        if other.id == run.id or name not in (other.model, other.served_model):
            continue
        theirs = (other.extra or {}).get("quality")
        if isinstance(theirs, dict) and same_prompts(result, theirs):
            found = (other.id, theirs)
    return found


def measure_quality(
    store: RunNotes | None,
    run_id: str | None,
    endpoint: Endpoint,
    setting: QualitySetting,
    *,
    api: str = "chat",
) -> dict[str, Any]:
    """Measure ``setting`` against ``endpoint``; with a stored run, state the agreement with its reference and
    store the result in the run's ``extra["quality"]``. Returns the result."""
    if setting.source == "lm-eval":
        assert setting.lm_task is not None
        result = run_lm_eval(endpoint, setting.lm_task)
    else:
        result = run_probe(endpoint, count=setting.tasks, api=api)
    if store is not None and run_id is not None:
        ref = find_reference(store, run_id, result) if result.get("answers") else None
        if ref is not None:
            result["reference_run"] = ref[0]
            result["agreement"] = agreement(result["answers"], ref[1]["answers"])
        store.merge_run_extra(run_id, quality=result)
    return result


def quality_line(result: dict[str, Any]) -> str:
    """``quality (probe): 20 of 24 right (83%, 95% CI 64-93%); greedy agreement with run X 100%``"""
    if result.get("error"):
        return f"quality ({result.get('source')}): {result['error']}"
    lo, hi = result.get("accuracy_ci95") or [0.0, 1.0]
    text = (
        f"quality ({result.get('source')}): {result.get('correct')} of {result.get('tasks')} right "
        f"({(result.get('accuracy') or 0):.0%}, 95% CI {lo:.0%}-{hi:.0%})"
    )
    if result.get("agreement") is not None:
        text += f"; greedy agreement with run {result.get('reference_run')} {result['agreement']:.0%}"
    return text


def before_load(
    store: RunNotes | None,
    run_id: str | None,
    endpoint: Endpoint,
    settings: Any,
    *,
    quality: str | None = None,
) -> dict[str, Any] | None:
    """What a sweep or bench records before its load: what the run serves (``extra["served"]``, unless its
    deployment already recorded it) and, when ``quality`` (else ``settings.quality``) asks, the quality
    (``extra["quality"]``, unless a resumed run has it). Without a stored run the quality is only measured.
    Neither ever fails the run: a problem is stored in words. Returns the quality result measured now, if any."""
    extra = (store.get_run(run_id).extra or {}) if store is not None and run_id is not None else {}
    if store is not None and run_id is not None and "served" not in extra:
        record_served(store, run_id, endpoint, sampling=sampling_of(settings))
    setting = parse_quality(quality if quality is not None else getattr(settings, "quality", None))
    if setting is None or "quality" in extra:
        return None
    try:
        return measure_quality(
            store, run_id, endpoint, setting, api=str(getattr(settings, "endpoint", "chat"))
        )
    except UserInputError as exc:
        failed = {"source": setting.label(), "error": exc.message, "tasks": 0, "correct": 0, "accuracy": None}
        if store is not None and run_id is not None:
            store.merge_run_extra(run_id, quality=failed)
        return failed
