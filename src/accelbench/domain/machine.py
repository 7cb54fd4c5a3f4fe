"""What ``accelbench machine probe`` measured on one machine: memory bandwidth of one core and of every usable
core, matrix-multiply throughput (decode- and prefill-shaped) on one core and on all of them, and the CPU it
ran on. The planner's ``local_machine`` uses a saved probe instead of its cited guesses (``plan/hardware.py``);
``telemetry/probe.py`` measures, saves and loads it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from accelbench.domain.strict import StrictModel

PROBE_SCHEMA_VERSION = 1

GemmShape = Literal["decode", "prefill"]


class BandwidthKernel(StrictModel):
    """One STREAM-like kernel over arrays much larger than the last-level cache, best of the repeats."""

    kernel: Literal["copy", "triad"] = Field(
        description="copy: a = b (2 array passes); triad: a = b + s*c as two numpy passes (5 array passes)."
    )
    threads: int = Field(ge=1, description="Threads streaming at once, each over its own arrays.")
    gbps: float = Field(gt=0, description="Bytes read + written per second, all threads together, GB/s.")
    array_mib: float = Field(gt=0, description="Size of each array of one thread, MiB.")
    repeats: int = Field(ge=1, description="Timed passes; the best is kept.")


class GemmResult(StrictModel):
    """One matrix multiply (M x K) @ (K x N), best of its timed calls."""

    shape: GemmShape = Field(description="decode: a few rows (tokens in a step); prefill: a prompt's rows.")
    m: int = Field(ge=1)
    k: int = Field(ge=1)
    n: int = Field(ge=1)
    threads: int = Field(ge=1, description="Threads the library was allowed.")
    gflops: float = Field(gt=0, description="2*M*K*N / best call time, all threads together, GFLOP/s.")
    calls: int = Field(ge=1, description="Timed calls; the best is kept.")


class MachineProbe(StrictModel):
    """One run of ``accelbench machine probe``; keyed by ``cpu_model`` wherever it is saved."""

    schema_version: int = PROBE_SCHEMA_VERSION
    cpu_model: str = Field(
        description="The CPU's model name, whitespace collapsed (the key of a saved probe)."
    )
    vendor: str | None = None
    arch: str = Field(description="Machine architecture, e.g. x86_64 or aarch64.")
    isa: list[str] = Field(default_factory=list, description="Serving-relevant instruction sets seen.")
    matrix_engine: str | None = Field(default=None, description="The best matrix path the flags show.")
    cores_used: int = Field(ge=1, description="CPUs the all-core figures used (affinity and cgroup limit).")
    logical_cpus: int | None = None
    physical_cores: int | None = None
    threads_per_core: int | None = Field(default=None, description="SMT threads per physical core.")
    numa_nodes: int = Field(default=1, ge=1)
    llc_mib: float | None = Field(default=None, description="Last-level cache the usable CPUs share, MiB.")
    measured_at: datetime
    wall_seconds: float = Field(ge=0, description="How long the probe took.")
    quick: bool = Field(default=False, description="Small sizes (a test): figures may include the caches.")
    accelbench_version: str
    libraries: dict[str, str] = Field(
        default_factory=dict, description="Versions of what measured: python, numpy, torch."
    )
    # bandwidth
    single_core_gbps: float = Field(gt=0, description="Memory bandwidth of one core, GB/s (best kernel).")
    all_core_gbps: float = Field(gt=0, description="Memory bandwidth of all cores used, GB/s (best kernel).")
    bandwidth: list[BandwidthKernel] = Field(default_factory=list, description="Every kernel measured.")
    # matrix multiply
    gemm_library: str = Field(description="What multiplied, e.g. 'torch 2.5.1' or 'numpy 2.1.0'.")
    gemm_dtype: Literal["bfloat16", "float32"]
    gemm_python: str = Field(description="Which Python ran it: this interpreter, or an installed engine's.")
    bf16_measured: bool = Field(description="False when only a float32 figure could be measured.")
    decode_gflops_single: float = Field(gt=0, description="Decode-shaped GEMM on one core, GFLOP/s.")
    decode_gflops_all: float = Field(gt=0, description="Decode-shaped GEMM on all cores used, GFLOP/s.")
    prefill_gflops_single: float = Field(gt=0, description="Prefill-shaped GEMM on one core, GFLOP/s.")
    prefill_gflops_all: float = Field(gt=0, description="Prefill-shaped GEMM on all cores used, GFLOP/s.")
    gemm: list[GemmResult] = Field(default_factory=list, description="Every GEMM measured.")
    notes: list[str] = Field(default_factory=list, description="What could not be measured, and why.")

    @property
    def all_core_gbps_per_core(self) -> float:
        return self.all_core_gbps / self.cores_used

    @property
    def prefill_gflops_per_core(self) -> float:
        """What each core sustains on a prefill-shaped GEMM while all of them work."""
        return self.prefill_gflops_all / self.cores_used
