"""One ``DescribeInstanceTypes`` entry as a catalog row: a pure function over the EC2 API's dicts and the catalog,
with the rules of what is taken from the API and what from the catalog (see ``instances_refresh``'s docstring),
and the figures that changed between two rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from accelbench.catalog.loader import Catalog
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType

# Reported device memory is the usable part of the spec's: accept 90 % .. spec + 1 % (at least 1 GiB).
MEMORY_LOW = 0.90
MEMORY_HIGH = 0.01
PROVENANCE_FIELDS = ("refreshed_from", "refreshed_region", "refreshed_date", "provider")
PRICE_FIELDS = ("on_demand_usd", "price_region", "price_date", "price_source")
_BANDWIDTH_RE = re.compile(r"(?:(\d+)\s*x\s*)?([\d.]+)\s*(gigabit|megabit)", re.IGNORECASE)


@dataclass(frozen=True)
class Provenance:
    """Where refreshed rows come from; recorded on every row."""

    provider: str
    endpoint: str  # credentials masked
    region: str
    date: str


@dataclass(frozen=True)
class Skipped:
    """An instance type the endpoint listed that could not be mapped onto a known spec, and why."""

    name: str
    reason: str


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", name.lower()) if t}


def _names_match(reported: str, spec_name: str) -> bool:
    """``H100`` matches ``H100-SXM``, ``A100`` matches ``A100-40GB``, ``RTX PRO Server 6000`` matches
    ``RTX-PRO-6000``: one name's words are all in the other's. ``L4`` does not match ``L40S``."""
    a, b = _tokens(reported), _tokens(spec_name)
    return bool(a and b) and (a <= b or b <= a)


def _memory_fits(reported_gib: float | None, spec: AcceleratorSpec) -> bool:
    if reported_gib is None:
        return True
    return (
        spec.memory_gib * MEMORY_LOW
        <= reported_gib
        <= spec.memory_gib + max(1.0, spec.memory_gib * MEMORY_HIGH)
    )


def _mib_to_gib(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return round(float(value) / 1024, 3)
    return None


def network_gbps(doc: Mapping[str, Any]) -> float | None:
    """The listed network figure in Gbit/s ("Up to 12.5 Gigabit" -> 12.5; "4x 100 Gigabit" -> 400), else the
    network cards' peak bandwidths summed; None when the endpoint says neither."""
    net = doc.get("NetworkInfo") or {}
    m = _BANDWIDTH_RE.search(str(net.get("NetworkPerformance") or ""))
    if m:
        value = float(m.group(2)) * int(m.group(1) or 1)
        return round(value if m.group(3).lower() == "gigabit" else value / 1000, 3)
    cards = [c.get("PeakBandwidthInGbps") for c in net.get("NetworkCards") or [] if isinstance(c, Mapping)]
    peaks = [float(p) for p in cards if isinstance(p, int | float) and not isinstance(p, bool) and p > 0]
    return sum(peaks) if peaks else None


@dataclass(frozen=True)
class _Devices:
    kind: AcceleratorType
    name: str
    count: int
    memory_gib: float | None  # per device, as reported
    cores: int | None = None  # NeuronCores per device


def _devices(doc: Mapping[str, Any]) -> _Devices | str | None:
    """The accelerators the endpoint reports (GPUs or Neuron devices), None for none, or why they cannot be
    served."""
    if doc.get("FpgaInfo"):
        return "an FPGA instance (no FPGA runtime is served)"
    groups: list[tuple[AcceleratorType, list[Mapping[str, Any]]]] = []
    gpus = [g for g in (doc.get("GpuInfo") or {}).get("Gpus") or [] if isinstance(g, Mapping)]
    if gpus:
        groups.append((AcceleratorType.gpu, gpus))
    neuron = [d for d in (doc.get("NeuronInfo") or {}).get("NeuronDevices") or [] if isinstance(d, Mapping)]
    if not neuron:  # older responses list Inferentia under InferenceAcceleratorInfo
        neuron = [
            d
            for d in (doc.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
            if isinstance(d, Mapping)
        ]
    if neuron:
        groups.append((AcceleratorType.neuron, neuron))
    if not groups:
        return None
    if len(groups) > 1 or len(groups[0][1]) > 1:
        return "it reports more than one kind of accelerator"
    kind, (dev,) = groups[0]
    name = str(dev.get("Name") or "").strip()
    count = dev.get("Count")
    if not name:
        return f"its {kind.value} has no name"
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return f"its {kind.value} count is missing"
    cores = (dev.get("CoreInfo") or {}).get("Count")
    return _Devices(
        kind=kind,
        name=name,
        count=count,
        memory_gib=_mib_to_gib((dev.get("MemoryInfo") or {}).get("SizeInMiB")),
        cores=cores if isinstance(cores, int) and not isinstance(cores, bool) else None,
    )


def _arch(doc: Mapping[str, Any]) -> str | None:
    archs = [str(a) for a in (doc.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []]
    if "arm64" in archs:
        return "arm64"
    if "x86_64" in archs:
        return "x86_64"
    return None


def _topology(vcpu: Mapping[str, Any], vcpus: int) -> tuple[int | None, int | None] | str:
    def num(key: str) -> int | None:
        v = vcpu.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else None

    cores, tpc = num("DefaultCores"), num("DefaultThreadsPerCore")
    if cores is not None and tpc is not None and cores * tpc != vcpus:
        return f"its topology does not add up ({cores} cores x {tpc} threads is not {vcpus} vCPUs)"
    if cores is None and tpc is not None and vcpus % tpc == 0:
        cores = vcpus // tpc
    if tpc is None and cores is not None and vcpus % cores == 0:
        tpc = vcpus // cores
    return cores, tpc


def _spec_for_device(dev: _Devices, catalog: Catalog) -> AcceleratorSpec | str:
    candidates = [
        s for s in catalog.accelerators.values() if s.kind == dev.kind and _names_match(dev.name, s.name)
    ]
    if not candidates:
        return f"{dev.kind.value} {dev.name!r} has no accelerator spec (add one to accelerators.yaml)"
    fitting = [s for s in candidates if _memory_fits(dev.memory_gib, s)]
    if not fitting:
        return (
            f"{dev.kind.value} {dev.name!r} reports {dev.memory_gib:g} GiB per device; no spec called "
            f"{', '.join(s.name for s in candidates)} has that memory"
        )
    if dev.memory_gib is None and len(fitting) > 1:
        return f"{dev.kind.value} {dev.name!r} matches {', '.join(s.name for s in fitting)} and reports no memory"
    return min(fitting, key=lambda s: abs(s.memory_gib - (dev.memory_gib or s.memory_gib)))


def _catalog_match(
    name: str, family: str, kind: AcceleratorType, arch: str, devices: _Devices | None, catalog: Catalog
) -> tuple[InstanceType | None, InstanceType | None, AcceleratorSpec] | str:
    """What the catalog already says of an API entry: the same type's shipped row, a row of its family (the
    template for what the API does not report: CPU generation, ISA) and the accelerator spec; or why it does
    not map: a family row whose accelerator kind, architecture, device name or device memory disagree with what
    the API reports, or a CPU type whose family the catalog does not describe."""
    same = next((i for i in catalog.instances if i.name == name), None)
    template = same or next((i for i in catalog.instances if i.family == family), None)
    if template is not None:
        if template.accelerator_type != kind:
            reported = f"{devices.count} x {devices.name}" if devices else "no accelerator"
            return f"catalog family {family!r} is {template.accelerator_type.value} but it reports {reported}"
        if template.arch != arch:
            return f"catalog family {family!r} is {template.arch} but it reports {arch}"
        spec = catalog.accelerators[template.accelerator_name]
        if devices is not None:
            if not _names_match(devices.name, spec.name):
                return f"it reports {devices.kind.value} {devices.name!r}; catalog family {family!r} has {spec.name}"
            if not _memory_fits(devices.memory_gib, spec):
                return (
                    f"it reports {devices.memory_gib:g} GiB per {devices.name}; the {spec.name} spec has "
                    f"{spec.memory_gib:g} GiB"
                )
        return same, template, spec
    if devices is None:
        return (
            f"no catalog family {family!r} names its CPU (generation, ISA): add the family to a user catalog "
            "file (instances/*.yaml under the data dir's catalog folder)"
        )
    found = _spec_for_device(devices, catalog)
    if isinstance(found, str):
        return found
    return None, None, found


def map_instance_type(doc: Mapping[str, Any], catalog: Catalog, prov: Provenance) -> InstanceType | Skipped:
    """One ``DescribeInstanceTypes`` entry as a catalog row, or a :class:`Skipped` with the reason."""
    raw_name = str(doc.get("InstanceType") or "").strip()
    name = raw_name.lower()

    def skip(reason: str) -> Skipped:
        return Skipped(raw_name or "?", reason)

    family, _, size = name.partition(".")
    if not family or not size:
        return skip("its name is not FAMILY.SIZE")
    vcpu = doc.get("VCpuInfo") or {}
    vcpus = vcpu.get("DefaultVCpus")
    if not isinstance(vcpus, int) or isinstance(vcpus, bool) or vcpus < 1:
        return skip("it reports no vCPU count (VCpuInfo.DefaultVCpus)")
    topo = _topology(vcpu, vcpus)
    if isinstance(topo, str):
        return skip(topo)
    cores, tpc = topo
    memory = _mib_to_gib((doc.get("MemoryInfo") or {}).get("SizeInMiB"))
    if memory is None:
        return skip("it reports no memory size (MemoryInfo.SizeInMiB)")
    arch = _arch(doc)
    if arch is None:
        archs = (doc.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
        return skip(
            f"architecture {', '.join(map(str, archs)) or 'unknown'} (only x86_64 and arm64 are served)"
        )
    devices = _devices(doc)
    if isinstance(devices, str):
        return skip(devices)
    kind = devices.kind if devices else AcceleratorType.cpu

    match = _catalog_match(name, family, kind, arch, devices, catalog)
    if isinstance(match, str):
        return skip(match)
    same, template, spec = match

    if same is not None:
        numa = same.numa_nodes  # the API says nothing of NUMA; the shipped row's lscpu count is of this type
    elif kind == AcceleratorType.cpu and cores is not None:
        numa = spec.sockets_for(cores) or 1
    else:
        numa = 1
    net = network_gbps(doc)
    row: dict[str, Any] = {
        "name": name,
        "family": family,
        "provider": prov.provider,
        "vcpus": vcpus,
        "physical_cores": cores,
        "threads_per_core": tpc,
        "memory_gib": memory,
        "arch": arch,
        "numa_nodes": numa,
        # a measurement of the shipped row's type still describes the same type read from the API
        "memory_read_gbps": same.memory_read_gbps if same is not None else None,
        "memory_read_source": same.memory_read_source if same is not None else None,
        "network_gbps": net if net is not None else (same.network_gbps if same is not None else 0.0),
        "accelerator_type": kind,
        "accelerator_name": spec.name,
        "accelerator_count": devices.count if devices else 0,
        "accelerator_memory_gib": spec.memory_gib if devices else 0.0,
        "cpu_generation": template.cpu_generation if template is not None else None,
        "cpu_isa": list(template.cpu_isa) if template is not None else [],
        "refreshed_from": prov.endpoint,
        "refreshed_region": prov.region,
        "refreshed_date": prov.date,
    }
    if same is not None and same.provider == prov.provider and same.on_demand_usd is not None:
        row.update({k: getattr(same, k) for k in PRICE_FIELDS})
    try:
        return InstanceType.model_validate(row)
    except ValidationError as exc:
        why = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'row'}: {e['msg']}" for e in exc.errors())
        return skip(f"it does not make a valid catalog row ({why})")


def changes_between(old: InstanceType, new: InstanceType) -> list[str]:
    """The figures that differ (provenance aside), as ``field: old -> new``."""
    a, b = old.model_dump(mode="json"), new.model_dump(mode="json")
    out = []
    for key in b:
        if key in PROVENANCE_FIELDS or key in PRICE_FIELDS:
            continue
        if a.get(key) != b.get(key):
            out.append(f"{key}: {a.get(key)} -> {b.get(key)}")
    if old.provider != new.provider:
        out.append(f"provider: {old.provider} -> {new.provider}")
    return out
