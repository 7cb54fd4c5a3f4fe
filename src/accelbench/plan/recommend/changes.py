"""The settings a refusal could change: for an instance that refuses the model as asked, each of the caller's
own settings (a fixed quantization, a context length, a tensor-parallel size, a KV dtype or space, threads)
changed alone, planned again, and kept where the instance then serves the model. They are offered as the
caller's choice, never applied: a quantization costs quality, a shorter context refuses longer requests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.plan_query import FitQuery
from accelbench.domain.recommendation import Recommendation, RefusalCode, SettingChange
from accelbench.domain.run import EngineSettings
from accelbench.errors import AccelbenchError
from accelbench.plan.memory import round_down_length
from accelbench.plan.recommend.tier_steps import pow2_upto

#: refusals no setting of the caller's can change
UNCHANGEABLE = (RefusalCode.non_generative, RefusalCode.unsupported_architecture)
FORMATS = {
    AcceleratorType.gpu: ("fp8", "int8", "int4"),
    AcceleratorType.cpu: ("int8", "int4"),
    AcceleratorType.neuron: (),
}


@dataclass(frozen=True)
class Candidate:
    setting: str
    value: str
    flag: str
    overrides: dict[str, Any]


def _with(settings: EngineSettings, **update: Any) -> EngineSettings:
    return settings.model_copy(update=update)


def candidates(instance: InstanceType, asked: FitQuery) -> list[Candidate]:
    """Each of the caller's settings changed alone, in the order a person would try them."""
    kind, s = instance.accelerator_type, asked.engine_settings or EngineSettings()
    out: list[Candidate] = []
    if asked.quantization is not None:
        for q in FORMATS[kind]:
            if q != asked.quantization:
                out.append(Candidate("quantization", q, f"--quantization {q}", {"quantization": q}))
    if asked.max_model_len is not None:
        out.append(Candidate("max_model_len", "open", "no --max-model-len", {"max_model_len": None}))
    if s.tensor_parallel_size is not None:
        units = max(1, instance.numa_nodes) if kind == AcceleratorType.cpu else None
        sizes = [1, units] if units else pow2_upto(max(instance.accelerator_count, 1) * 8)
        for tp in dict.fromkeys(sizes):
            if tp != s.tensor_parallel_size:
                out.append(
                    Candidate(
                        "tensor_parallel_size",
                        str(tp),
                        f"--tensor-parallel-size {tp}",
                        {"engine_settings": _with(s, tensor_parallel_size=tp)},
                    )
                )
    if kind == AcceleratorType.gpu and not (asked.kv_cache_dtype or "").startswith("fp8"):
        out.append(Candidate("kv_cache_dtype", "fp8", "--kv-cache-dtype fp8", {"kv_cache_dtype": "fp8"}))
    if s.kv_cache_space_gib is not None:
        out.append(
            Candidate(
                "kv_cache_space_gib",
                "open",
                "no --kv-cache-space-gib",
                {"engine_settings": _with(s, kv_cache_space_gib=None)},
            )
        )
    if s.threads is not None:
        out.append(Candidate("threads", "open", "no --threads", {"engine_settings": _with(s, threads=None)}))
    return out


def effect(rec: Recommendation) -> str:
    """What the instance serves with the change, in words."""
    assert rec.settings is not None
    s = rec.settings
    text = (
        f"fits with {s.weight_format} weights on {s.tensor_parallel_size} unit(s), max_model_len "
        f"{s.max_model_len:,}"
    )
    if s.quantization is not None:
        text += f" ({s.weight_format} can cost accuracy: check it on your task)"
    return text


def setting_changes(
    rec: Recommendation, instance: InstanceType, asked: FitQuery, plan: Callable[..., Recommendation]
) -> list[SettingChange]:
    """The changes of the caller's settings with which ``instance`` serves the model; ``plan`` re-plans with
    the overrides given (the same question otherwise, no catalog search)."""
    if rec.fits or rec.refusal is None or rec.refusal.code in UNCHANGEABLE:
        return []
    out: list[SettingChange] = []
    for c in candidates(instance, asked):
        try:
            again = plan(**c.overrides)
        except (
            AccelbenchError
        ):  # a change the planner cannot take here (e.g. a size it rejects) is no way forward
            continue
        if not again.fits or again.settings is None:
            continue
        value, flag = c.value, c.flag
        if c.setting == "max_model_len":
            again = longest_context(again, asked, plan)
            assert again.settings is not None
            value = str(again.settings.max_model_len)
            flag = f"--max-model-len {again.settings.max_model_len}"
        out.append(SettingChange(setting=c.setting, value=value, flag=flag, effect=effect(again)))
    return out


def longest_context(
    open_answer: Recommendation, asked: FitQuery, plan: Callable[..., Recommendation]
) -> Recommendation:
    """The longest standard context (up to the one asked for) the KV budget holds one sequence of: what
    someone who asked for a long context wants offered, rather than the planner's own, shorter choice."""
    if open_answer.memory is None or asked.max_model_len is None:
        return open_answer
    longest = min(round_down_length(open_answer.memory.kv_cache_tokens), asked.max_model_len)
    if open_answer.settings is None or longest <= open_answer.settings.max_model_len:
        return open_answer
    try:
        again = plan(max_model_len=longest)
    except AccelbenchError:
        return open_answer
    return again if again.fits and again.settings is not None else open_answer
