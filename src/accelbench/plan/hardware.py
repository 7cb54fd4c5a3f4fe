"""What the planner needs to know about an instance's hardware, in one place.

``hardware_for(instance, spec)`` turns a catalog row and its accelerator spec into peaks per tensor-parallel
unit (a GPU, a NeuronCore, or the CPU host), and for CPUs the bandwidth limit the issue asks for: the smaller
of the sockets' DRAM bandwidth and what the instance's own cores can pull (a vCPU slice of a big socket
reaches far more than its proportional share of the socket, but a few cores cannot saturate it).

``local_machine(environment)`` builds the same view for "this machine" from a captured run environment
(``telemetry.host.capture_environment``), so runs measured locally can be predicted and calibrated.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import yaml

from accelbench.domain.estimate import EfficiencyFactors
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType, Source
from accelbench.domain.machine import MachineProbe

LOCAL_INSTANCE = "local"


def is_local(instance_name: str | None) -> bool:
    """Whether an instance name means this machine ("local", "this", "localhost")."""
    return (instance_name or "").strip().lower() in (LOCAL_INSTANCE, "this", "localhost")


FACTOR_NAMES = tuple(EfficiencyFactors.model_fields)


@lru_cache(maxsize=1)
def efficiency_data() -> dict[str, Any]:
    text = (resources.files("accelbench.plan") / "data" / "efficiency.yaml").read_text()
    doc: dict[str, Any] = yaml.safe_load(text)
    if doc.get("schema_version") != 1:
        raise RuntimeError("plan/data/efficiency.yaml: unsupported schema_version")
    return doc


def _values(block: dict[str, Any], key: str = "value") -> dict[str, float]:
    return {
        k: float(v[key] if key in v else v["value"])
        for k, v in block.items()
        if isinstance(v, dict) and "value" in v
    }


@lru_cache(maxsize=64)
def default_factors(kind: str, engine: str) -> EfficiencyFactors:
    """The shipped factors for an accelerator kind and engine (cited, or fitted to the public data set)."""
    return _factors(kind, engine, "value")


def cpu_stream_share() -> float:
    """The share of a CPU socket's peak bandwidth a stream of reads reaches (STREAM's), as the CPU kind's
    cited bandwidth_efficiency prior: what turns an achieved per-core rate into the peak the model scales."""
    return _values(efficiency_data()["kinds"]["cpu"], "prior")["bandwidth_efficiency"]


def cpu_peak_gbps(socket_gbps: float, cores_gbps: float) -> float:
    """The peak a CPU's decode is scaled from (x bandwidth_efficiency): the sockets' peak, or the busy cores'
    rate as the peak that efficiency brings back to it. The socket figure is channels x transfer rate; the
    per-core figure is already a rate a core reaches (Little's law at the loaded latency, or measured), so
    scaling it by the efficiency as well would count the shortfall from peak twice."""
    return min(socket_gbps, cores_gbps / cpu_stream_share())


@lru_cache(maxsize=64)
def prior_factors(kind: str, engine: str) -> EfficiencyFactors:
    """The cited priors the shipped factors were fitted from: where fits that grade the model start."""
    return _factors(kind, engine, "prior")


def _factors(kind: str, engine: str, key: str) -> EfficiencyFactors:
    data = efficiency_data()
    values = _values(data["kinds"][kind], key)
    values.update(_values(data.get("engines", {}).get(engine, {}) or {}, key))
    return EfficiencyFactors(**{k: values[k] for k in FACTOR_NAMES})


def pcie_allreduce_gbps(pcie_gen: int | None, ranks: int) -> float:
    """Bus bandwidth of an all-reduce ring of ``ranks`` GPUs over PCIe alone (efficiency.yaml
    pcie_allreduce_busbw_gbps): the cards' generation's figure for the smallest ring measured that holds
    ``ranks`` (the largest measured beyond it); a card whose generation the catalog does not give is taken as
    PCIe 4.0, the oldest of the catalog's PCIe-only GPUs."""
    table = efficiency_data()["pcie_allreduce_busbw_gbps"]["value"]
    by_ranks = table.get(pcie_gen) or table[4]
    ring = min((n for n in by_ranks if n >= ranks), default=max(by_ranks))
    return float(by_ranks[ring])


@dataclass(frozen=True)
class Hardware:
    """Peaks per tensor-parallel unit and the facts the fit and speed models use."""

    instance: InstanceType
    spec: AcceleratorSpec
    kind: AcceleratorType
    units: int  # GPUs, NeuronCores, or 1 (a CPU host; TP on CPUs splits sockets, see numa_nodes)
    unit_memory_gib: float  # per GPU / per NeuronCore / host RAM
    unit_bandwidth_gbps: float  # peak, per unit (CPU: min(sockets, cores) for the whole host)
    unit_bf16_tflops: float
    unit_fp8_tflops: float | None
    unit_int8_tops: float | None
    link_gbps: float  # device to device (PCIe-only GPUs: a ring over all of them; see allreduce_gbps)
    nvlink: bool
    # CPU only
    physical_cores: int = 0
    sockets: int = 1
    numa_nodes: int = 1  # the nodes the sockets' channels are split over (sub-NUMA clusters on Xeon 6)
    socket_bandwidth_gbps: float = 0.0
    cores_bandwidth_gbps: float = 0.0
    measured_read_gbps: float | None = None  # the instance's DRAM read bandwidth as measured (catalog)

    @property
    def memory_ceiling_gbps(self) -> float:
        """The peak the instance's memory lets its cores reach, as the model scales it: the sockets' channel
        peak, or the read bandwidth measured on the instance when that is lower (a VM on part of a socket,
        or on one sub-NUMA cluster of it), taken back to a peak as the per-core rate is (``cpu_peak_gbps``)."""
        if not self.measured_read_gbps:
            return self.socket_bandwidth_gbps
        return min(self.socket_bandwidth_gbps, self.measured_read_gbps / cpu_stream_share())

    @property
    def ceiling_is_measured(self) -> bool:
        return self.memory_ceiling_gbps < self.socket_bandwidth_gbps

    def allreduce_gbps(self, tp: int) -> float:
        """Bus bandwidth of a ``tp``-rank all-reduce: the device link (NVLink, NeuronLink; a CPU's memory), or
        on GPUs without NVLink what a PCIe ring of that many ranks reaches (``pcie_allreduce_gbps``)."""
        if self.nvlink or self.kind != AcceleratorType.gpu:
            return self.link_gbps
        return pcie_allreduce_gbps(self.spec.pcie_gen, tp)

    def nodes_share(self, nodes: int | None) -> float:
        """The share of the memory channels ``nodes`` NUMA nodes hold (all of them when None)."""
        return min(nodes or self.numa_nodes, self.numa_nodes) / self.numa_nodes

    def tflops_for(self, weight_format: str) -> float:
        """Peak matrix rate for a weight format's math: W8A8 FP8 uses FP8 units, INT8 W8A8 the INT8 ones,
        weight-only formats (int4, AWQ, GPTQ) dequantise to BF16."""
        if weight_format == "fp8" and self.unit_fp8_tflops:
            return self.unit_fp8_tflops
        if weight_format in ("int8", "w8a8") and self.unit_int8_tops:
            return self.unit_int8_tops
        return self.unit_bf16_tflops


def hardware_for(instance: InstanceType, spec: AcceleratorSpec) -> Hardware:
    kind = instance.accelerator_type
    data = efficiency_data()
    if kind == AcceleratorType.cpu:
        # The catalog row's topology (physical cores, else vCPUs / threads per core); the local machine's row
        # counts its usable CPUs as cores (vcpus = cores) unless it says its topology.
        local = instance.name == LOCAL_INSTANCE and instance.physical_cores is None
        cores = max(1, instance.vcpus if local else instance.cores)
        # NUMA nodes split the memory channels: a socket's peak is shared by its nodes (Xeon 6's sub-NUMA
        # clusters), and the sockets are the cores over the CPU's cores per socket (this machine's probe gives
        # one node's figure: its nodes are its sockets)
        nodes = max(1, instance.numa_nodes)
        sockets = (None if instance.name == LOCAL_INSTANCE else spec.sockets_for(cores)) or nodes
        per_core_bw = spec.per_core_bandwidth_gbps or data["local_cpu_per_core_bandwidth_gbps"][instance.arch]
        socket_bw = spec.memory_bandwidth_gbps * sockets
        cores_bw = cores * per_core_bw
        per_core_flops = spec.per_core_bf16_gflops or (spec.bf16_tflops * 1000 / (spec.cores_per_socket or 1))
        return Hardware(
            instance=instance,
            spec=spec,
            kind=kind,
            units=1,
            unit_memory_gib=instance.memory_gib,
            unit_bandwidth_gbps=min(socket_bw, cores_bw),
            unit_bf16_tflops=cores * per_core_flops / 1000,
            unit_fp8_tflops=None,
            # VNNI / AMX-INT8 / I8MM roughly double the BF16 rate for W8A8
            unit_int8_tops=2 * cores * per_core_flops / 1000 if spec.int8_tops else None,
            link_gbps=float(socket_bw),
            nvlink=False,
            physical_cores=cores,
            sockets=sockets,
            numa_nodes=nodes,
            socket_bandwidth_gbps=socket_bw,
            cores_bandwidth_gbps=cores_bw,
            measured_read_gbps=instance.memory_read_gbps,
        )
    if kind == AcceleratorType.neuron:
        # a tensor-parallel unit is a (logical) NeuronCore; FP8 and INT8 are served in BF16 on Neuron
        cores_per_device = spec.neuron_logical_cores or spec.neuron_cores or 2
        return _device_units(instance, spec, cores_per_device, nvlink=True, low_precision=False)
    return _device_units(instance, spec, 1, nvlink=spec.interconnect_gbps is not None, low_precision=True)


def device_memory_gib(instance: InstanceType, spec: AcceleratorSpec) -> float:
    """A device's memory as the engine sizes it: what CUDA reports of a GPU (vLLM's gpu_memory_utilization
    multiplies torch's total_memory, a few hundred MiB to a few GiB below the part's capacity), else the
    instance row's figure."""
    if instance.accelerator_type == AcceleratorType.gpu and spec.memory_reported_gib is not None:
        return spec.memory_reported_gib
    return instance.accelerator_memory_gib


def _device_units(
    instance: InstanceType, spec: AcceleratorSpec, per_device: int, *, nvlink: bool, low_precision: bool
) -> Hardware:
    """An accelerator instance's peaks per tensor-parallel unit, each device split into ``per_device`` units
    (a GPU is one; a Neuron device its NeuronCores); ``low_precision``: whether FP8/INT8 peaks apply."""
    link = spec.interconnect_gbps or pcie_allreduce_gbps(spec.pcie_gen, instance.accelerator_count)
    return Hardware(
        instance=instance,
        spec=spec,
        kind=instance.accelerator_type,
        units=instance.accelerator_count * per_device,
        unit_memory_gib=device_memory_gib(instance, spec) / per_device,
        unit_bandwidth_gbps=spec.memory_bandwidth_gbps / per_device,
        unit_bf16_tflops=spec.bf16_tflops / per_device,
        unit_fp8_tflops=spec.fp8_tflops if low_precision else None,
        unit_int8_tops=spec.int8_tops if low_precision else None,
        link_gbps=link / per_device,
        nvlink=nvlink,
    )


# ------------------------------------------------------------------------------------------- local CPU
_ISA_NAMES = {
    "amx_bf16": "amx_bf16",
    "amx_tile": "amx",
    "amx_int8": "amx_int8",
    "avx512_bf16": "avx512_bf16",
    "avx512_vnni": "avx512_vnni",
    "avx512f": "avx512",
    "avx512_fp16": "avx512_fp16",
    "avx2": "avx2",
    "sve": "sve",
    "sve2": "sve2",
    "svebf16": "sve_bf16",
    "bf16": "bf16",
    "i8mm": "i8mm",
    "asimd": "neon",
    "asimddp": "dotprod",
}


def _isa_from_flags(flags: list[str]) -> list[str]:
    fset = {f.lower() for f in flags}
    out: list[str] = []
    for flag, name in _ISA_NAMES.items():
        if flag in fset and name not in out:
            out.append(name)
    if "amx_bf16" in out and "amx" not in out:
        out.append("amx")
    return out


def bf16_flops_per_cycle(isa: list[str]) -> tuple[float, str]:
    """BF16 FLOP per cycle per core of the best matrix path in ``isa``, and its name."""
    table = efficiency_data()["cpu_isa_bf16_flops_per_cycle"]
    s = set(isa)
    if "amx" in s or "amx_bf16" in s:
        return float(table["amx"]), "AMX"
    if "avx512_bf16" in s:
        return float(table["avx512_bf16"]), "AVX512-BF16"
    if "avx512" in s:
        return float(table["avx512"]), "AVX-512 (FP32 FMA)"
    if "sve" in s and ("bf16" in s or "sve_bf16" in s):
        return float(table["sve_bf16"]), "SVE BF16 (BFMMLA)"
    if "neon" in s and "bf16" in s:
        return float(table["neon_bf16"]), "NEON BF16"
    if "avx2" in s:
        return float(table["avx2"]), "AVX2 (FP32 FMA)"
    return float(table["neon"]), "NEON"


def llamacpp_int8_tops(hw: Hardware) -> float | None:
    """The INT8 rate llama.cpp's quantised matrix kernels run at on a CPU host. On x86 they are vector
    kernels (AVX-512 VNNI, AVX-VNNI or AVX2 byte multiply-adds; ggml-cpu's quants), not AMX tiles: ggml's AMX
    path is a separate buffer type for a few formats, and the published Xeon runs of K-quants prefill at a
    vector rate, a tenth to a thirtieth of AMX-INT8's. The core's clock is its BF16 peak over the BF16
    FLOP per cycle of its matrix path; on Arm, SDOT / I8MM (``unit_int8_tops``)."""
    if hw.kind != AcceleratorType.cpu or hw.instance.arch != "x86_64" or not hw.unit_int8_tops:
        return hw.unit_int8_tops
    table = efficiency_data()["cpu_isa_vector_int8_ops_per_cycle"]
    fpc, _ = bf16_flops_per_cycle(hw.spec.isa)
    for name in ("avx512_vnni", "avx_vnni", "avx2"):
        if name in hw.spec.isa:
            return hw.unit_bf16_tflops * float(table[name]) / fpc
    return hw.unit_int8_tops


def _arch(value: str | None) -> Literal["x86_64", "arm64"]:
    v = (value or "").lower()
    return "arm64" if v in ("aarch64", "arm64") else "x86_64"


def local_cpu_name(environment: dict[str, Any]) -> str:
    """A stable name for a local CPU (the calibration key of local runs), e.g. 'local:AMD EPYC'."""
    cpu = environment.get("cpu") or {}
    model = str(cpu.get("model") or "unknown CPU").strip()
    model = re.sub(r"\s+", " ", model)
    return f"local:{model}"


def local_machine(
    environment: dict[str, Any] | None = None, probe: MachineProbe | None = None
) -> tuple[InstanceType, AcceleratorSpec]:
    """An instance row and CPU spec for a machine described by a captured environment (default: this one).

    With a probe (``probe``, else the one ``accelbench machine probe`` saved for this CPU model) the figures
    are measured: per-core bandwidth is one core's, the sockets' bandwidth the all-core figure (so the smaller
    of it and cores x per-core is what all cores were measured to pull) and per-core FLOPs the prefill-shaped
    BF16 GEMM rate of all cores over their count (a float32-only probe leaves FLOPs to the guess below).
    Without one, per-core FLOPs come from the ISA the flags show times the clock; per-core bandwidth from the
    cited defaults (``plan calibrate`` corrects both from measured runs on that machine). The socket's
    bandwidth is not knowable from inside a VM, so a generous default lets the cores' own limit decide.
    A machine whose logical CPUs are SMT siblings (all of them usable) is described with its physical cores
    and threads per core, as a catalog row is: the engine binds, and memory is pulled by, physical cores.
    """
    if environment is None:
        # heavy: the host probe (psutil, httpx), only for "this machine"
        from accelbench.telemetry.host import capture_environment

        environment = capture_environment(command="")
    cpu = environment.get("cpu") or {}
    mem = environment.get("memory") or {}
    data = efficiency_data()
    arch = _arch(cpu.get("arch"))
    usable = cpu.get("usable_cpus") or cpu.get("logical_cpus") or 1
    limit = cpu.get("cgroup_cpu_limit")
    cores = max(1, int(min(usable, math.floor(limit)) if limit else usable))
    physical, tpc = _smt_topology(cpu, cores)
    isa = _isa_from_flags(list(cpu.get("flags") or []))
    if not isa:
        isa_has = ((cpu.get("isa") or {}).get("has")) or {}
        isa = [name.lower().replace("-", "_") for name, ok in isa_has.items() if ok]
    fpc, path = bf16_flops_per_cycle(isa)
    ghz = (float(cpu["max_mhz"]) / 1000) if cpu.get("max_mhz") else float(data["cpu_default_clock_ghz"])
    per_core_gflops = fpc * ghz
    per_core_bw = float(data["local_cpu_per_core_bandwidth_gbps"][arch])
    socket_bw = float(data["local_cpu_socket_bandwidth_gbps"])
    sources = [Source(title=f"captured environment; matrix path {path} at {ghz:.2f} GHz")]
    measured = probe if probe is not None else _saved_probe(cpu.get("model"))
    if measured is not None:
        per_core_bw, socket_bw, per_core_gflops, sources = _probe_figures(
            measured, cores, int(cpu.get("numa_nodes") or 1), per_core_gflops, sources
        )
    # SMT siblings share a core's matrix unit: the matrix peak counts physical cores
    matrix_cores = physical or cores
    name = local_cpu_name(environment)
    spec = AcceleratorSpec(
        name=name,
        kind=AcceleratorType.cpu,
        vendor=str(cpu.get("vendor") or ""),
        memory_gib=0,
        memory_bandwidth_gbps=socket_bw,
        bf16_tflops=per_core_gflops * matrix_cores / 1000,
        int8_tops=2 * per_core_gflops * matrix_cores / 1000
        if ("avx512_vnni" in isa or "i8mm" in isa)
        else None,
        cores_per_socket=matrix_cores,
        isa=isa,
        memory_channels=None,
        per_core_bandwidth_gbps=per_core_bw,
        per_core_bf16_gflops=per_core_gflops,
        sources=sources,
    )
    instance = InstanceType(
        name=LOCAL_INSTANCE,
        family=LOCAL_INSTANCE,
        vcpus=cores,
        physical_cores=physical,
        threads_per_core=tpc,
        memory_gib=float(mem.get("total_gib") or 1.0),
        arch=arch,
        numa_nodes=int(cpu.get("numa_nodes") or 1),
        accelerator_type=AcceleratorType.cpu,
        accelerator_name=name,
        cpu_generation=str(cpu.get("model") or "local CPU"),
        cpu_isa=isa,
    )
    return instance, spec


def _smt_topology(cpu: dict[str, Any], cores: int) -> tuple[int | None, int | None]:
    """(physical cores, threads per core) of a local machine whose usable CPUs are all its logical CPUs and
    whose logical CPUs are SMT siblings of fewer physical cores (lscpu 'Thread(s) per core: 2'); (None, None)
    otherwise: without SMT, or when an affinity mask or a CPU quota leaves a share of the CPUs, whose siblings
    are not known, every usable CPU counts as a core."""
    logical, physical = cpu.get("logical_cpus"), cpu.get("physical_cores")
    if not isinstance(logical, int) or not isinstance(physical, int) or physical <= 0:
        return None, None
    if cores != logical or logical <= physical or logical % physical:
        return None, None
    return physical, logical // physical


def _saved_probe(cpu_model: str | None) -> MachineProbe | None:
    """The probe ``accelbench machine probe`` saved for this CPU model; None without one (or no model)."""
    if not cpu_model:
        return None
    # heavy: the hardware probe (numpy), only for "this machine"
    from accelbench.telemetry.probe import load_probe

    return load_probe(str(cpu_model))


def _probe_figures(
    probe: MachineProbe, cores: int, numa_nodes: int, guessed_gflops: float, guessed: list[Source]
) -> tuple[float, float, float, list[Source]]:
    """(per-core GB/s, per-socket GB/s, per-core BF16 GFLOP/s, sources) of a local machine from its probe."""
    day = probe.measured_at.date().isoformat()
    text = (
        f"measured by accelbench machine probe on {day}{' (quick)' if probe.quick else ''}: memory "
        f"{probe.single_core_gbps:.1f} GB/s on one core, {probe.all_core_gbps:.1f} GB/s on {probe.cores_used} cores"
    )
    if probe.cores_used != cores:
        text += f" (this machine now allows {cores})"
    gflops = guessed_gflops
    if probe.bf16_measured:
        gflops = probe.prefill_gflops_per_core
        text += f"; BF16 GEMM {gflops:.1f} GFLOP/s per core ({probe.gemm_library}, prefill-shaped, all cores)"
    else:
        text += f"; BF16 GEMM not measured ({probe.gemm_library} {probe.gemm_dtype} only)"
    # The efficiency factors are shares of datasheet peaks; a probe measures what a STREAM-like kernel and a
    # large GEMM reach, which are themselves shares of the peak. Dividing by those shares puts the measured
    # figures on the scale the factors expect, so a probed machine and a catalog row are planned alike.
    data = efficiency_data()
    stream = float(data["probe_stream_share_of_peak"]["value"])
    gemm = float(data["probe_gemm_share_of_peak"]["value"])
    if probe.bf16_measured:
        gflops /= gemm
    text += f"; planned as peaks of {1 / stream:.2f}x the bandwidth" + (
        f" and {1 / gemm:.2f}x the GEMM rate measured" if probe.bf16_measured else " measured"
    )
    sources = [Source(title=text, accessed=day)] + ([] if probe.bf16_measured else guessed)
    return probe.single_core_gbps / stream, probe.all_core_gbps / max(1, numa_nodes) / stream, gflops, sources
