"""The shipped data set of published, independently measured LLM-serving results (``plan/data/public_measurements.yaml``).

Each row is one measured configuration transcribed from a public source (vendor documentation, benchmark
repositories, blog posts), with the settings the source states and the metrics it reports; ``quote`` says
where in the source each figure is. The planner is graded against these rows (``plan/accuracy.py``).

Use :func:`load_public_measurements` for the validated, cached data set and :func:`by_kind` to split it into
GPU / Neuron / CPU rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from accelbench.catalog import get_catalog
from accelbench.errors import AccelbenchError

SCHEMA_VERSION = 1
DATA_FILE = "public_measurements.yaml"
KINDS: tuple[str, ...] = ("gpu", "neuron", "cpu")
METRICS: tuple[str, ...] = (
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "e2e_ms",
    "output_tokens_per_s",
    "requests_per_s",
    "per_token_latency_ms",
)


class PublicDataError(AccelbenchError):
    """The shipped public data file is malformed (a bug in the data file, not in user input)."""


class StrictRecord(BaseModel):
    """A record of a shipped data file: unknown keys are an error, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceRef(StrictRecord):
    """Where something in a shipped data file was published and which copy was read."""

    title: str = Field(min_length=1)
    url: str = Field(pattern=r"^https?://")
    publisher: str = Field(min_length=1)
    date: str | None = Field(
        default=None, description="Publication or measurement date when the source says."
    )
    retrieved_from: str | None = Field(
        default=None,
        description="The copy that was read (repository, path, commit) when it differs from url.",
    )
    notes: str | None = None


class PublicSource(SourceRef):
    """Where a group of rows was published, with the engine they ran."""

    engine: str = Field(min_length=1)
    engine_version: str | None = None


class PublicMeasurement(StrictRecord):
    """One published measurement with the settings it was taken under. See the data file's header."""

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    source: str = Field(min_length=1)
    kind: Literal["gpu", "neuron", "cpu"]
    # hardware
    accelerator: str = Field(min_length=1, description="A key of catalog/data/accelerators.yaml.")
    catalog_instance: str | None = Field(
        default=None, description="Closest catalog instance type with this accelerator and >= units of it."
    )
    units: int | None = Field(default=None, ge=1, description="GPUs, NeuronCores (logical) or vCPUs used.")
    # model and engine
    model: str = Field(min_length=1, description="A modelspec preset name, else the HF id.")
    checkpoint: str | None = Field(default=None, description="Exact checkpoint when it differs from model.")
    precision: str = Field(min_length=1)
    kv_cache_dtype: str | None = None
    engine: str = Field(min_length=1)
    engine_version: str | None = None
    kernel: Literal["dot", "unfused-fp8-dequant"] | None = Field(
        default=None,
        description="dot: a llama.cpp build ran the quantised weights as downloaded, with its per-row "
        "dot-product kernels (not repacked for its GEMM kernels). unfused-fp8-dequant: a vLLM build without "
        "FP8 GEMM kernels for the GPU applied the FP8 scales in separate elementwise passes.",
    )
    tensor_parallel_size: int | None = Field(default=None, ge=1)
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    # workload
    input_len: float | None = Field(default=None, gt=0, description="Tokens; a mean for dataset rows.")
    output_len: float | None = Field(default=None, gt=0, description="Tokens; a mean for dataset rows.")
    lengths: Literal["fixed", "random", "dataset"]
    dataset: str | None = None
    load: Literal["concurrency", "request_rate", "batch"]
    concurrency: int | None = Field(default=None, ge=1)
    request_rate: float | None = Field(default=None, gt=0, description="Requests/s; .inf = all at once.")
    batch: int | None = Field(default=None, ge=1)
    num_prompts: int | None = Field(default=None, ge=1)
    # metrics
    stat: str | None = Field(default=None, description="median / p50 / mean / aggregate / single run / ...")
    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    itl_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)
    output_tokens_per_s: float | None = Field(default=None, gt=0)
    requests_per_s: float | None = Field(default=None, gt=0)
    per_token_latency_ms: float | None = Field(
        default=None, gt=0, description="A source-defined per-token latency that is not TPOT (see notes)."
    )
    # provenance
    derived: str | None = Field(default=None, description="How converted or computed values were obtained.")
    quote: str = Field(min_length=1, description="Where the figures appear in the source.")
    notes: str | None = None
    doubts: tuple[str, ...] = ()

    def _level(self) -> float | None:
        return {"concurrency": self.concurrency, "request_rate": self.request_rate, "batch": self.batch}[
            self.load
        ]

    @model_validator(mode="after")
    def _consistent(self) -> PublicMeasurement:
        if self._level() is None:
            raise ValueError(f"load is {self.load!r} but {self.load} is not given")
        if self.lengths in ("fixed", "random") and (self.input_len is None or self.output_len is None):
            raise ValueError(f"lengths {self.lengths!r} needs input_len and output_len")
        if self.lengths == "dataset" and not self.dataset:
            raise ValueError("lengths 'dataset' needs the dataset named")
        if not self.metrics():
            raise ValueError(f"no metric given (one of {', '.join(METRICS)})")
        for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "output_tokens_per_s", "requests_per_s"):
            v = getattr(self, name)
            if v is not None and not math.isfinite(v):
                raise ValueError(f"{name} must be finite")
        return self

    def metrics(self) -> dict[str, float]:
        """The metrics this row reports."""
        return {m: v for m in METRICS if (v := getattr(self, m)) is not None}

    @property
    def load_level(self) -> float:
        """The concurrency, request rate or batch size the row was measured at."""
        value = self._level()
        assert value is not None  # guaranteed by the validator
        return float(value)


class PublicDataSet(StrictRecord):
    """The whole file: sources by id and the measurement rows."""

    schema_version: Literal[1]
    sources: dict[str, PublicSource]
    measurements: tuple[PublicMeasurement, ...]

    @model_validator(mode="after")
    def _cross_check(self) -> PublicDataSet:
        seen: set[str] = set()
        for row in self.measurements:
            if row.id in seen:
                raise ValueError(f"duplicate measurement id {row.id!r}")
            seen.add(row.id)
            if row.source not in self.sources:
                raise ValueError(f"measurement {row.id!r} names unknown source {row.source!r}")
        unused = set(self.sources) - {r.source for r in self.measurements}
        if unused:
            raise ValueError(f"sources without measurements: {', '.join(sorted(unused))}")
        return self

    def row(self, id: str) -> PublicMeasurement:
        for r in self.measurements:
            if r.id == id:
                return r
        raise KeyError(id)

    def rows_of(self, source: str) -> list[PublicMeasurement]:
        return [r for r in self.measurements if r.source == source]


def parse_public_measurements(doc: Mapping[str, Any], where: str = DATA_FILE) -> PublicDataSet:
    """Validate a loaded document; PublicDataError naming the first problem otherwise."""
    if not isinstance(doc, Mapping):
        raise PublicDataError(f"{where}: expected a mapping at the top level.")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise PublicDataError(f"{where}: unsupported schema_version {doc.get('schema_version')!r}.")
    try:
        return PublicDataSet.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        rows = doc.get("measurements")
        if isinstance(rows, list) and len(first["loc"]) > 1 and first["loc"][0] == "measurements":
            idx = first["loc"][1]
            if isinstance(idx, int) and 0 <= idx < len(rows) and isinstance(rows[idx], Mapping):
                loc += f" (id {rows[idx].get('id')!r})"
        raise PublicDataError(f"{where}: {loc}: {first['msg']}") from None


@lru_cache(maxsize=1)
def load_public_measurements() -> PublicDataSet:
    """The shipped data set, validated (cached for the process)."""
    text = (resources.files("accelbench.plan") / "data" / DATA_FILE).read_text(encoding="utf-8")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PublicDataError(f"{DATA_FILE}: not valid YAML: {exc}") from None
    return parse_public_measurements(doc)


def kind_of(row: PublicMeasurement, catalog: Any = None) -> str:
    """The row's accelerator kind as the catalog describes it (the row's own ``kind`` when the catalog does
    not know the accelerator)."""
    if catalog is None:
        catalog = get_catalog()
    spec = catalog.accelerators.get(row.accelerator)
    return str(spec.kind.value) if spec is not None else row.kind


def by_kind(ds: PublicDataSet, catalog: Any = None) -> dict[str, list[PublicMeasurement]]:
    """Rows grouped by accelerator kind (gpu / neuron / cpu; every kind present, possibly empty)."""
    if catalog is None:
        catalog = get_catalog()
    out: dict[str, list[PublicMeasurement]] = {k: [] for k in KINDS}
    for row in ds.measurements:
        out.setdefault(kind_of(row, catalog), []).append(row)
    return out


__all__ = [
    "KINDS",
    "METRICS",
    "SCHEMA_VERSION",
    "PublicDataError",
    "PublicDataSet",
    "PublicMeasurement",
    "PublicSource",
    "SourceRef",
    "StrictRecord",
    "by_kind",
    "kind_of",
    "load_public_measurements",
    "parse_public_measurements",
]
