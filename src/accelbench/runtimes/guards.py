"""Deployment guards shared by the CLI and the API: settings that cannot work on the chosen tier.

``check(params, runtime)`` raises ``GuardError`` (HTTP 400 in the API, a clean message in the CLI) listing
every problem at once, each phrased as what to change. The same settings pass on a GPU instance: the
CPU-only rules look at the accelerator tier, never at the settings alone.

Rules (the seed platform's four CPU guards, plus the runtime/accelerator match and each runtime's own
``validate``):
- FP8 KV cache on CPU;
- a distributed or disaggregated deployment on CPU;
- tensor parallel above the NUMA node count on CPU;
- a dense unquantized model above the CPU ceiling (13e9 parameters; 8e9-13e9 only warns);
- a runtime that does not serve the instance's accelerator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.limits import CPU_DENSE_CEILING, CPU_DENSE_WARN
from accelbench.domain.quant import runtime_quantization as normalize_quantization
from accelbench.errors import GuardError
from accelbench.runtimes.runtime import Runtime, ServeParams, get_runtime, runtime_for_accelerator


@dataclass
class GuardReport:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _quantized(params: ServeParams) -> bool:
    return normalize_quantization(params.settings.quantization) in ("int8", "int4") or bool(
        normalize_quantization(params.pre_quantized)
    )


def evaluate(params: ServeParams, runtime: Runtime | str | None = None) -> GuardReport:
    """All guard findings for ``params`` served by ``runtime`` (default: the tier's runtime)."""

    if runtime is None:
        rt = runtime_for_accelerator(params.accelerator_type)
    elif isinstance(runtime, str):
        rt = get_runtime(runtime)
    else:
        rt = runtime
    report = GuardReport()
    s = params.settings
    if params.accelerator_type == AcceleratorType.cpu:
        if s.kv_cache_dtype and s.kv_cache_dtype.lower().startswith("fp8"):
            report.errors.append(
                f"kv_cache_dtype={s.kv_cache_dtype} is not supported on CPU instances (vLLM CPU keeps the KV "
                "cache in BF16): remove kv_cache_dtype, or choose a GPU instance for an FP8 KV cache"
            )
        if s.deployment_mode != "single":
            report.errors.append(
                f"deployment_mode={s.deployment_mode} is GPU only: CPU instances serve one model per "
                "instance; set deployment_mode to single"
            )
        tp = s.tensor_parallel_size
        if tp is not None and tp > params.numa_nodes:
            report.errors.append(
                f"tensor_parallel_size={tp} exceeds the {params.numa_nodes} NUMA node(s) of the instance: "
                f"on CPU, tensor parallel is one rank per NUMA node; set it to {params.numa_nodes} or less"
            )
        if params.parameters is not None and not params.moe and not _quantized(params):
            billions = params.parameters / 1e9
            if params.parameters > CPU_DENSE_CEILING:
                report.errors.append(
                    f"a dense unquantized {billions:.1f}B-parameter model is above the CPU ceiling of "
                    f"{CPU_DENSE_CEILING / 1e9:.0f}B: use quantization int8 (W8A8) or int4 (W4A8) with a "
                    "compressed-tensors checkpoint, a smaller model, or a GPU instance"
                )
            elif params.parameters > CPU_DENSE_WARN:
                report.warnings.append(
                    f"a dense unquantized {billions:.1f}B-parameter model will be slow on CPU (memory "
                    "bandwidth bound); int8 (W8A8) roughly halves the bytes per token"
                )
    for msg in rt.validate(params):
        if msg not in report.errors:
            report.errors.append(msg)
    return report


def check(params: ServeParams, runtime: Runtime | str | None = None) -> list[str]:
    """Raise ``GuardError`` when any guard fails; return the warnings otherwise."""
    report = evaluate(params, runtime)
    if report.errors:
        if len(report.errors) == 1:
            raise GuardError(f"This setting cannot work on this instance: {report.errors[0]}.")
        lines = "\n".join(f"- {e}" for e in report.errors)
        raise GuardError(f"{len(report.errors)} settings cannot work on this instance:\n{lines}")
    return report.warnings
