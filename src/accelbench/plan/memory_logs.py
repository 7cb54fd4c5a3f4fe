"""vLLM's own start-up memory accounting, transcribed from public logs (``plan/data/vllm_memory_logs.yaml``),
and the planner's memory model checked against it.

Each entry is one engine start: the model, the GPU and its count, the settings, and what vLLM printed (the
device's total, the weights, the non-torch and activation memory, the KV cache in GiB or tokens). The check
asks the planner for a fit at exactly those settings and compares the KV cache it sizes per rank with the one
vLLM reserved: that is what decides how many sequences run at once, and so queueing under load.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import Field, ValidationError

from accelbench.domain.plan_query import FitQuery
from accelbench.domain.run import EngineSettings
from accelbench.errors import AccelbenchError
from accelbench.modelspec import load_model_spec
from accelbench.plan.public_data import PublicDataError, SourceRef, StrictRecord
from accelbench.plan.recommend import recommend

DATA_FILE = "vllm_memory_logs.yaml"


class MemoryLog(StrictRecord):
    """One vLLM start-up's memory lines with the settings it ran under. See the data file's header."""

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    source: str = Field(min_length=1)
    model: str = Field(min_length=1, description="The Hugging Face id as the log names it.")
    planner_model: str | None = Field(
        default=None, description="The preset the planner sizes it with, when the id is not one."
    )
    gpu: str | None = Field(default=None, description="A catalog accelerator key; None for other cards.")
    gpu_name: str | None = None
    gpu_count: int | None = Field(default=None, ge=1)
    tensor_parallel_size: int | None = Field(default=None, ge=1)
    pipeline_parallel_size: int | None = Field(default=None, ge=1)
    engine_version: str | None = None
    v1: bool | None = None
    dtype: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: int | None = Field(default=None, ge=1)
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    enforce_eager: bool | None = None
    total_gpu_memory_gib: float | None = Field(default=None, gt=0)
    weights_gib: float | None = Field(default=None, gt=0)
    non_torch_gib: float | None = Field(default=None, ge=0)
    activation_peak_gib: float | None = Field(default=None, ge=0)
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = Field(default=None, ge=1)
    gpu_blocks: int | None = Field(default=None, ge=0)
    block_size: int | None = Field(default=None, ge=1)
    cuda_graph_gib: float | None = Field(default=None, ge=0)
    quote: str = Field(min_length=1)
    doubts: list[str] = Field(default_factory=list)

    @property
    def kv_gib(self) -> float | None:
        """The KV cache vLLM reserved per rank, GiB; None when not printed (or printed as none left)."""
        return self.kv_cache_gib if self.kv_cache_gib is not None and self.kv_cache_gib > 0 else None


class MemoryLogs(StrictRecord):
    schema_version: int
    sources: dict[str, SourceRef]
    logs: list[MemoryLog]


@lru_cache(maxsize=1)
def load_memory_logs() -> MemoryLogs:
    """The validated shipped data set; every entry's source is listed and every ``gpu`` is in the catalog."""
    from accelbench.catalog import get_catalog

    text = resources.files("accelbench.plan.data").joinpath(DATA_FILE).read_text(encoding="utf-8")
    try:
        data = MemoryLogs.model_validate(yaml.safe_load(text))
    except ValidationError as exc:
        raise PublicDataError(f"{DATA_FILE}: {exc}") from exc
    known = set(get_catalog().accelerators)
    seen: set[str] = set()
    for e in data.logs:
        if e.source not in data.sources:
            raise PublicDataError(f"{DATA_FILE}: entry {e.id} cites unknown source {e.source!r}.")
        if e.gpu is not None and e.gpu not in known:
            raise PublicDataError(f"{DATA_FILE}: entry {e.id}: gpu {e.gpu!r} is not a catalog accelerator.")
        if e.id in seen:
            raise PublicDataError(f"{DATA_FILE}: duplicate id {e.id}.")
        seen.add(e.id)
    return data


@dataclass(frozen=True)
class KvCheck:
    """The planner's weights and KV cache for one logged start (``log``, whose figures it is read against): GiB
    per rank and KV tokens (the whole engine's); ``moe`` marks a mixture-of-experts model."""

    log: MemoryLog
    instance: str
    planned_weights_gib: float
    planned_gib: float
    planned_tokens: int
    moe: bool

    @property
    def kv_ratio(self) -> float | None:
        """Planned over logged KV cache: GiB where the log gives it, else tokens; None when it gives neither."""
        if self.log.kv_gib:
            return self.planned_gib / self.log.kv_gib
        if self.log.kv_cache_tokens:
            return self.planned_tokens / self.log.kv_cache_tokens
        return None

    @property
    def weights_ratio(self) -> float | None:
        """Planned over logged weights per rank; None when the log does not print them."""
        return self.planned_weights_gib / self.log.weights_gib if self.log.weights_gib else None


def checkable(e: MemoryLog) -> bool:
    """An entry the planner can size as it ran: a catalog GPU, tensor parallelism only, the checkpoint's own
    16-bit (or its FP8) weights, and weights or a KV cache that the log prints."""
    return (
        e.gpu is not None
        and (e.pipeline_parallel_size or 1) == 1
        and (e.dtype or "auto") in ("auto", "bfloat16", "float16")
        and (e.weights_gib is not None or logged_kv(e))
    )


def logged_kv(e: MemoryLog) -> bool:
    """Whether the log prints the KV cache vLLM reserved (in GiB or tokens)."""
    return e.kv_gib is not None or e.kv_cache_tokens is not None


def check_kv(e: MemoryLog, catalog: Any) -> KvCheck | str:
    """The planner's fit at the logged settings beside vLLM's KV cache; or why the entry cannot be sized."""
    if not checkable(e):
        return "not a tensor-parallel start on a catalog GPU with its weights or KV cache printed"
    try:
        model = load_model_spec(e.planner_model or e.model, allow_network=False)
    except AccelbenchError as exc:
        return f"model {e.model!r}: {exc.message}"
    tp = e.tensor_parallel_size or 1
    fitting = sorted(
        (i for i in catalog.instances if i.accelerator_name == e.gpu and i.accelerator_count >= tp),
        key=lambda i: i.accelerator_count,
    )
    if not fitting:
        return f"no catalog instance has {tp} x {e.gpu}"
    inst = fitting[0]
    online = e.quantization == "fp8" and model.quantization is None
    asked = FitQuery(
        quantization="fp8" if online else None,
        max_model_len=e.max_model_len,
        kv_cache_dtype=e.kv_cache_dtype if e.kv_cache_dtype not in (None, "auto") else None,
        engine_settings=EngineSettings(
            tensor_parallel_size=tp,
            gpu_memory_utilization=e.gpu_memory_utilization,
            max_model_len=e.max_model_len,
        ),
        engine="vllm",
    )
    rec = recommend(
        model, inst, asked, spec=catalog.accelerator(e.gpu), catalog=catalog, suggest_alternatives=False
    )
    if not rec.fits or rec.memory is None:
        return f"the planner says it does not fit: {rec.refusal.reason if rec.refusal else ''}"
    mem = rec.memory
    return KvCheck(
        log=e,
        instance=inst.name,
        planned_weights_gib=mem.weights_gib / mem.units,
        planned_gib=mem.kv_cache_gib / mem.units,
        planned_tokens=mem.kv_cache_tokens,
        moe=model.moe is not None,
    )
