"""The planner's out-of-source error, one record per published measurement, and the strata ranges come from.

``accuracy.out_of_source_records`` predicts each usable row of the public data set with factors fitted WITHOUT the
row's source (``plan/accuracy.py``'s leave-one-source-out fit) and records measured / predicted for TPOT,
TTFT and output tokens/s, with the row's stratum: accelerator family (``family_of``: L4, H100/H200, B200,
Inferentia2, Trainium, Xeon AMX, Graviton ...), engine and regime (``regime_of``: decode-bound,
prefill-bound or queueing). ``benchmarks/estimate_accuracy.py --write`` ships the records in
``plan/data/accuracy.yaml``; ``plan/ranges.py`` turns them into the 80% range every predicted figure carries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from accelbench.domain.instance_types import AcceleratorType

METRICS = ("tpot", "ttft", "tps")
REGIMES = ("decode-bound", "prefill-bound", "queueing")

# accelerator (catalog spec name, or its prefix) -> family; generations that share a memory system and
# kernels are one family (H100 and H200 are Hopper; B200 and B300 Blackwell)
_FAMILIES = (
    ("H100", "H100/H200"),
    ("H200", "H100/H200"),
    ("GH200", "H100/H200"),
    ("B200", "B200/B300"),
    ("B300", "B200/B300"),
    ("A100", "A100"),
    ("A10G", "A10G"),
    ("L40S", "L40S"),
    ("L4", "L4"),
    ("RTX", "RTX PRO 6000"),
    ("Inferentia", "Inferentia2"),
    ("Trainium", "Trainium"),
    ("Graviton", "Graviton"),
)


MOE = " MoE"  # the suffix of a family serving mixture-of-experts models


def family_of(accelerator: str, kind: str, isa: Sequence[str] = (), moe: bool = False) -> str:
    """The hardware family an accelerator belongs to, e.g. 'H100-SXM' -> 'H100/H200'; a CPU by its maker
    and matrix unit ('Xeon-GNR' -> 'Xeon AMX', this machine's CPU by the ISA it reports). ``moe``: the model
    is a mixture of experts, whose layers' routing and many small expert GEMMs the speed model has no term
    for: its error is its own stratum ('H100/H200 MoE'), never pooled into the dense models' ranges."""
    base = _hardware_family(accelerator, kind, isa)
    return base + MOE if moe else base


def is_moe_family(family: str) -> bool:
    return family.endswith(MOE)


def _hardware_family(accelerator: str, kind: str, isa: Sequence[str]) -> str:
    name = accelerator.removeprefix("local:").strip()
    for prefix, family in _FAMILIES:
        if name.upper().startswith(prefix.upper()):
            return family
    if kind == AcceleratorType.cpu.value:
        # every Xeon the catalog sells (Sapphire Rapids, Granite Rapids) has AMX; this machine says by its ISA
        if name.upper().startswith("XEON") or "amx" in isa or "amx_bf16" in isa:
            return "Xeon AMX"
        arm = any(i in isa for i in ("sve", "neon", "i8mm")) or "ARM" in name.upper()
        return "Arm CPU" if arm else "x86 CPU"
    return name or kind


def engine_group(engine: str) -> str:
    """Engines whose error is pooled: vLLM and SGLang share the GPU scheduler model."""
    return "vllm" if engine in ("vllm", "sglang") else engine


def regime_of(ttft_s: float, tpot_s: float, queue_s: float, prefill_s: float, output_len: int) -> str:
    """queueing when waiting for a slot is a quarter of TTFT or more, or when the queue has no end (a request
    rate above what the engine serves: TTFT grows for as long as the test runs); prefill-bound when the
    prompt's prefill takes longer than the request's decode; decode-bound otherwise."""
    if not math.isfinite(ttft_s) or (ttft_s > 0 and queue_s >= 0.25 * ttft_s):
        return "queueing"
    if prefill_s >= tpot_s * max(output_len - 1, 1):
        return "prefill-bound"
    return "decode-bound"


#: an error record's text fields (what the point is, the regime it ran in) and its measured / predicted ratios
_LABELS = ("id", "source", "kind", "family", "engine", "regime")
_RATIOS = (*METRICS, "ttft_share")


@dataclass(frozen=True)
class ErrorRecord:
    """One published measurement graded out of source: measured / predicted per metric (None: not measured)."""

    id: str
    source: str
    kind: str
    family: str
    engine: str
    regime: str
    tpot: float | None
    ttft: float | None
    tps: float | None
    ttft_share: float | None = None  # predicted TTFT / predicted E2E: how E2E's range mixes TTFT's and TPOT's

    def ratio(self, metric: str) -> float | None:
        value: float | None = getattr(self, metric)
        return value

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in _LABELS}
        for m in _RATIOS:
            v = self.ratio(m)
            out[m] = None if v is None else round(v, 4)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ErrorRecord:
        fields: dict[str, Any] = {k: str(d.get(k) or "") for k in _LABELS}
        fields.update({m: float(d[m]) if d.get(m) is not None else None for m in _RATIOS})
        return cls(**fields)


@lru_cache(maxsize=1)
def shipped_accuracy() -> dict[str, Any]:
    """What ``benchmarks/estimate_accuracy.py --write`` recorded in ``plan/data/accuracy.yaml`` (empty if none)."""
    try:
        text = (resources.files("accelbench.plan") / "data" / "accuracy.yaml").read_text()
    except FileNotFoundError:
        return {}
    doc = yaml.safe_load(text) or {}
    return doc if isinstance(doc, dict) else {}


def shipped_range_scales() -> dict[str, float]:
    """The factors ``benchmarks/estimate_accuracy.py --write`` found the ranges' widths (in logs) need for 80% of
    held-out sources' rows to fall inside them, by group (dense, moe: ``ranges.scale_group``;
    ``range_grading.range_scale``); empty when none was recorded."""
    value = shipped_accuracy().get("range_scale")
    if not isinstance(value, dict):
        return {}
    return {str(k): float(v) for k, v in value.items() if isinstance(v, int | float) and v > 0}


@lru_cache(maxsize=1)
def shipped_records() -> tuple[ErrorRecord, ...]:
    """The out-of-source records ``benchmarks/estimate_accuracy.py --write`` shipped (empty if none)."""
    rows = shipped_accuracy().get("errors") or []
    return tuple(ErrorRecord.from_dict(r) for r in rows if isinstance(r, dict))
