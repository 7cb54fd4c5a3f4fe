"""Build ``ServeParams`` in one place from (model, instance, recommendation, engine settings).

Every target (local process, Kubernetes manifest, EC2 user data, export) calls ``params_for`` so a setting
is merged the same way everywhere: what the user set in the engine settings wins; the planner's
recommendation fills what the user left unset (context length, batch size, tensor parallel, the CPU KV
budget, the GPU KV dtype, quantization); the instance gives the accelerator tier, device count,
architecture and NUMA nodes.
"""

from __future__ import annotations

from typing import Any

from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.run import EngineSettings
from accelbench.runtimes.runtime import ServeParams

#: EngineSettings field <- the recommendation attributes that may carry it (first one present wins)
_FROM_RECOMMENDATION: dict[str, tuple[str, ...]] = {
    "max_model_len": ("max_model_len",),
    "max_num_seqs": ("max_num_seqs", "concurrency", "max_concurrency"),
    "max_num_batched_tokens": ("max_num_batched_tokens",),
    "tensor_parallel_size": ("tensor_parallel_size", "tp", "tp_degree"),
    "kv_cache_space_gib": ("kv_cache_space_gib", "cpu_kv_cache_space_gib", "kv_space_gib"),
    "kv_cache_dtype": ("kv_cache_dtype",),
    "quantization": ("quantization",),
    "gpu_memory_utilization": ("gpu_memory_utilization",),
}

#: EngineSettings fields that only one accelerator tier uses: the recommendation fills them on that tier only
#: (the KV dtype is a GPU knob: a CPU fp8 request is refused by the guards)
_TIER_ONLY: dict[str, AcceleratorType] = {
    "kv_cache_dtype": AcceleratorType.gpu,
    "kv_cache_space_gib": AcceleratorType.cpu,
    "gpu_memory_utilization": AcceleratorType.gpu,
}

#: ServeParams fields the instance type decides (same names on ``InstanceType``)
_FROM_INSTANCE = ("accelerator_type", "accelerator_count", "arch", "numa_nodes")


def _rec_sources(recommendation: Any) -> list[Any]:
    """Where to look for values: a planner ``Recommendation`` answers through ``settings.engine_settings()``
    (the exact settings it chose) and ``memory.weights_gib``; plain dicts/objects are read directly."""
    sources = [recommendation]
    settings = getattr(recommendation, "settings", None)
    if settings is not None:
        to_engine = getattr(settings, "engine_settings", None)
        sources.append(to_engine() if callable(to_engine) else settings)
    memory = getattr(recommendation, "memory", None)
    if memory is not None:
        sources.append(memory)
    return sources


def _rec_value(recommendation: Any, names: tuple[str, ...]) -> Any:
    for source in _rec_sources(recommendation):
        if source is None:
            continue
        for name in names:
            value = source.get(name) if isinstance(source, dict) else getattr(source, name, None)
            if value is not None:
                return value
    return None


def merge_settings(
    settings: EngineSettings | None, recommendation: Any | None, instance: InstanceType | None = None
) -> EngineSettings:
    """The engine settings with every field the user left unset filled from the recommendation."""
    settings = settings or EngineSettings()
    if recommendation is None:
        return settings
    updates: dict[str, Any] = {}
    for field, names in _FROM_RECOMMENDATION.items():
        # a value the user gave wins; an explicit None (e.g. from a dumped spec) means "not given"
        if getattr(settings, field) is not None:
            continue
        value = _rec_value(recommendation, names)
        if value is None:
            continue
        if field == "quantization" and str(value).lower() in ("none", "bf16", "fp16", ""):
            continue  # native precision: nothing to pass
        if field == "kv_cache_dtype" and str(value).lower() in (
            "auto",
            "fp16",
            "bf16",
            "bfloat16",
            "float16",
        ):
            continue
        tier = _TIER_ONLY.get(field)
        if tier is not None and instance is not None and instance.accelerator_type != tier:
            continue
        updates[field] = value
    return settings.model_copy(update=updates)


def params_for(
    *,
    model: str,
    served_model_name: str,
    instance: InstanceType,
    settings: EngineSettings | None = None,
    recommendation: Any | None = None,
    model_size_gib: float | None = None,
    stream_weights: bool | None = None,
    **serve: Any,
) -> ServeParams:
    """The one way to build ``ServeParams``.

    ``recommendation`` is the planner's result (``accelbench.plan.recommend``); any object or dict with
    the attributes listed in ``_FROM_RECOMMENDATION`` works. ``stream_weights`` defaults to "the model is an
    s3:// URI"; a runtime whose image lacks the streamer downloads instead. ``serve``: the other
    ``ServeParams`` fields as the caller has them (parameters, moe, pre_quantized, trust_remote_code,
    isa_trace, host, port, hf_token_secret); ``ServeParams`` refuses an unknown one.
    """
    merged = merge_settings(settings, recommendation, instance)
    if model_size_gib is None and recommendation is not None:
        model_size_gib = _rec_value(recommendation, ("weights_gib", "model_size_gib"))
    return ServeParams(
        model=model,
        served_model_name=served_model_name,
        **{name: getattr(instance, name) for name in _FROM_INSTANCE},
        instance=instance,
        settings=merged,
        stream_weights=model.startswith("s3://") if stream_weights is None else stream_weights,
        model_size_gib=model_size_gib,
        **serve,
    )
