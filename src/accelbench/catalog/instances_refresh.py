"""Instance types read from an EC2-compatible endpoint (``DescribeInstanceTypes``) into a catalog overlay.

``accelbench catalog refresh-instances`` calls :func:`refresh_instances`: it asks the endpoint (AWS or any
cloud that speaks the EC2 API) for its instance types, maps each one onto the catalog's schema with
:func:`map_instance_type` (a pure function over the API's dicts) and writes the rows to
``<data_dir>/catalog/refreshed-instances.yaml``, which the loader applies over the shipped rows. What the API
gives is taken as given: vCPUs, physical cores and threads per core (``VCpuInfo``), host memory
(``MemoryInfo``), architecture (``ProcessorInfo``), GPUs (``GpuInfo``), Neuron devices (``NeuronInfo``) and
network (``NetworkInfo``). What the API cannot say comes from the catalog, never from a guess:

- the accelerator (or CPU) spec: from the catalog family of the same prefix (``m8i`` for ``m8i.2xlarge``),
  else, for GPUs and Neuron devices, the device name matched against the accelerator specs (and its memory,
  which picks between e.g. A100-40GB and A100-80GB). A CPU type whose family is not in the catalog is
  skipped: its CPU generation and ISA cannot be read from the API;
- the per-device memory is the spec's figure (the API reports the usable part, a few percent less); a
  reported size far from the spec's is a skip, not a silent correction;
- NUMA nodes (sockets): physical cores over the CPU spec's cores per socket; for GPU and Neuron hosts the
  catalog row of the same name, else 1;
- the snapshot price is kept only when the row comes from the same provider as the row it replaces.

A type that cannot be mapped is skipped with the reason. The overlay keeps the rows of earlier refreshes
(other endpoints, other types); a refreshed name replaces the earlier row of that name. It is written
atomically, after the catalog has been loaded with it, so a refresh never leaves a file that breaks
``get_catalog()``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fnmatch
import math
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import ValidationError

from accelbench.catalog.loader import (
    SCHEMA_VERSION,
    Catalog,
    get_catalog,
    load_catalog,
    parse_instances,
    refreshed_instances_file,
    reset_catalog_cache,
)
from accelbench.domain.catalog import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.errors import UserInputError
from accelbench.redact import redact_url

DEFAULT_REGION = "us-east-1"
NON_AWS_PROVIDER = "ec2-compatible"
MAX_NAMES_PER_CALL = 100  # DescribeInstanceTypes takes at most 100 names per request
# Reported device memory is the usable part of the spec's: accept 90 % .. spec + 1 % (at least 1 GiB).
MEMORY_LOW = 0.90
MEMORY_HIGH = 0.01
_PROVENANCE = ("refreshed_from", "refreshed_region", "refreshed_date", "provider")
_PRICE_FIELDS = ("on_demand_usd", "price_region", "price_date", "price_source")
_REGION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_PROVIDER_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_NAME_RE = re.compile(r"^[a-z0-9*?][a-z0-9*?-]*\.[a-z0-9*?][a-z0-9*?-]*$")
_BANDWIDTH_RE = re.compile(r"(?:(\d+)\s*x\s*)?([\d.]+)\s*(gigabit|megabit)", re.IGNORECASE)


class EndpointError(UserInputError):
    """The EC2 endpoint could not be used: no credentials, unreachable, or it refused the call (exit 1: not the
    input's fault)."""

    status_code = 503
    exit_code = 1


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


@dataclass
class RowChange:
    """One refreshed row: ``added`` (a new name), ``updated`` (figures changed: ``changes``) or
    ``unchanged`` (same figures, new provenance)."""

    instance: InstanceType
    status: str
    changes: list[str] = field(default_factory=list)
    shadowed_by_user_file: bool = False


@dataclass
class InstancesRefreshReport:
    provider: str
    endpoint: str
    region: str
    date: str
    path: Path
    rows: list[RowChange] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def by_status(self, status: str) -> list[RowChange]:
        return [r for r in self.rows if r.status == status]

    def as_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "endpoint": self.endpoint,
            "region": self.region,
            "date": self.date,
            "overlay": str(self.path),
            "counts": {
                "added": len(self.by_status("added")),
                "updated": len(self.by_status("updated")),
                "unchanged": len(self.by_status("unchanged")),
                "skipped": len(self.skipped),
            },
            "rows": [
                {
                    "status": r.status,
                    "changes": r.changes,
                    "shadowed_by_user_file": r.shadowed_by_user_file,
                    "instance": r.instance.model_dump(mode="json"),
                    "cores": r.instance.cores,
                }
                for r in self.rows
            ],
            "skipped": [{"name": s.name, "reason": s.reason} for s in self.skipped],
        }


# --------------------------------------------------------------------------------------------- inputs
def check_endpoint_url(url: str) -> str:
    """The endpoint URL, stripped; an error unless it is http(s)://host[:port][/path]."""
    url = (url or "").strip()
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserInputError(
            f"Not an endpoint URL: {redact_url(url)!r}.",
            hint="Give the EC2 API's URL, e.g. --endpoint-url https://ec2.us-east-1.amazonaws.com",
        )
    return url


def check_region(region: str) -> str:
    region = (region or "").strip()
    if not _REGION_RE.match(region):
        raise UserInputError(f"Not a region name: {region!r}.", hint="e.g. --region us-east-1")
    return region


def default_provider(endpoint_url: str) -> str:
    """``aws`` for an AWS endpoint host (``*.amazonaws.com``, ``*.amazonaws.com.cn``), else ``ec2-compatible``."""
    host = (urlsplit(endpoint_url).hostname or "").lower()
    return "aws" if host.endswith((".amazonaws.com", ".amazonaws.com.cn")) else NON_AWS_PROVIDER


def check_provider(name: str) -> str:
    name = (name or "").strip().lower()
    if not _PROVIDER_RE.match(name):
        raise UserInputError(
            f"Not a provider name: {name!r}.",
            hint="Lower-case letters, digits, '.', '_' and '-', e.g. --provider-name my-cloud.",
        )
    return name


def split_names(values: Sequence[str] | None) -> list[str]:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]`` (lower-cased, deduplicated, in order); bad names are errors.
    A name may hold the EC2 filter wildcards ``*`` and ``?`` (``m8i.*``)."""
    out: list[str] = []
    for value in values or []:
        for part in value.split(","):
            name = part.strip().lower()
            if not name:
                continue
            if not _NAME_RE.match(name):
                raise UserInputError(
                    f"Not an instance type name: {part.strip()!r}.",
                    hint="Expected FAMILY.SIZE, e.g. m8i.2xlarge or m8i.*.",
                )
            if name not in out:
                out.append(name)
    return out


# --------------------------------------------------------------------------------------------- mapping
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

    same = next((i for i in catalog.instances if i.name == name), None)
    template = same or next((i for i in catalog.instances if i.family == family), None)
    if template is not None:
        if template.accelerator_type != kind:
            reported = f"{devices.count} x {devices.name}" if devices else "no accelerator"
            return skip(
                f"catalog family {family!r} is {template.accelerator_type.value} but it reports {reported}"
            )
        if template.arch != arch:
            return skip(f"catalog family {family!r} is {template.arch} but it reports {arch}")
        spec = catalog.accelerators[template.accelerator_name]
        if devices is not None:
            if not _names_match(devices.name, spec.name):
                return skip(
                    f"it reports {devices.kind.value} {devices.name!r}; catalog family {family!r} has {spec.name}"
                )
            if not _memory_fits(devices.memory_gib, spec):
                return skip(
                    f"it reports {devices.memory_gib:g} GiB per {devices.name}; the {spec.name} spec has "
                    f"{spec.memory_gib:g} GiB"
                )
    elif devices is None:
        return skip(
            f"no catalog family {family!r} names its CPU (generation, ISA): add the family to a user catalog "
            "file (instances/*.yaml under the data dir's catalog folder)"
        )
    else:
        found = _spec_for_device(devices, catalog)
        if isinstance(found, str):
            return skip(found)
        spec = found

    if kind == AcceleratorType.cpu and cores is not None and spec.cores_per_socket:
        numa = max(1, math.ceil(cores / spec.cores_per_socket))
    else:
        numa = same.numa_nodes if same is not None else 1
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
        row.update({k: getattr(same, k) for k in _PRICE_FIELDS})
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
        if key in _PROVENANCE or key in _PRICE_FIELDS:
            continue
        if a.get(key) != b.get(key):
            out.append(f"{key}: {a.get(key)} -> {b.get(key)}")
    if old.provider != new.provider:
        out.append(f"provider: {old.provider} -> {new.provider}")
    return out


# --------------------------------------------------------------------------------------------- the API call
def ec2_client(endpoint_url: str, region: str) -> Any:
    """A boto3 EC2 client at ``endpoint_url`` with credentials from the usual boto3 chain (environment,
    profile, container or instance role), quick to give up. NoCredentialsError up front when there are none."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import NoCredentialsError

    session = boto3.session.Session(region_name=region)
    if session.get_credentials() is None:
        raise NoCredentialsError()
    cfg = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=10, read_timeout=60)
    return session.client("ec2", endpoint_url=endpoint_url, config=cfg)


def describe_instance_types(client: Any, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every ``DescribeInstanceTypes`` entry (paginated), or those matching ``names`` (100 per request).

    Names go in an ``instance-type`` filter rather than ``InstanceTypes``, so a name the endpoint does not
    sell matches nothing instead of failing the whole call, and wildcards work."""
    paginator = client.get_paginator("describe_instance_types")
    batches: list[list[str] | None] = (
        [list(names[i : i + MAX_NAMES_PER_CALL]) for i in range(0, len(names), MAX_NAMES_PER_CALL)]
        if names
        else [None]
    )
    out: list[dict[str, Any]] = []
    for batch in batches:
        kwargs: dict[str, Any] = {"Filters": [{"Name": "instance-type", "Values": batch}]} if batch else {}
        for page in paginator.paginate(**kwargs):
            if "InstanceTypes" not in page and not (page.get("ResponseMetadata") or {}).get("RequestId"):
                # botocore reads any 200 page as an empty answer; an EC2 API always sends a request id
                raise _NotEc2Error()
            out.extend(page.get("InstanceTypes") or [])
    return out


class _NotEc2Error(Exception):
    """The endpoint answered, but not like an EC2 API."""


def _explain(exc: Exception, endpoint: str) -> UserInputError:
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )
    from botocore.parsers import ResponseParserError

    unchanged = "The catalog is unchanged."
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return EndpointError(
            f"No credentials found for the EC2 endpoint {endpoint}, so instance types cannot be read.",
            hint="Set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (the endpoint's own keys for a "
            "non-AWS cloud); ec2:DescribeInstanceTypes is enough. " + unchanged,
        )
    if isinstance(exc, EndpointConnectionError):
        return EndpointError(
            f"Cannot reach the EC2 endpoint {endpoint}.",
            hint="Check --endpoint-url, the network or proxy. " + unchanged,
        )
    if isinstance(exc, NoRegionError):
        return UserInputError("No region for the EC2 endpoint.", hint="Give --region.")
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code, message = err.get("Code", "?"), err.get("Message", str(exc))
        if code in ("InvalidInstanceType", "InvalidParameterValue"):
            return UserInputError(
                f"The endpoint {endpoint} refused the instance types: {message}",
                hint="Check --instance-types (names the endpoint sells). " + unchanged,
            )
        return EndpointError(
            f"The EC2 endpoint {endpoint} refused DescribeInstanceTypes: {code}: {message}",
            hint="Check the credentials, the region and that they allow ec2:DescribeInstanceTypes. "
            + unchanged,
        )
    if isinstance(exc, BotoCoreError):
        return EndpointError(f"The call to the EC2 endpoint {endpoint} failed: {exc}", hint=unchanged)
    if isinstance(exc, ResponseParserError | _NotEc2Error):
        return EndpointError(
            f"The endpoint {endpoint} did not answer like an EC2 API (an unreadable DescribeInstanceTypes reply).",
            hint="Check that --endpoint-url is the cloud's EC2 API and --region one it serves. " + unchanged,
        )
    raise exc


def fetch_instance_types(
    endpoint_url: str, region: str, names: Sequence[str] | None = None, *, client: Any = None
) -> list[dict[str, Any]]:
    """``DescribeInstanceTypes`` at the endpoint; clear errors for no credentials, no route, refusal."""
    shown = redact_url(endpoint_url)
    try:
        cl = client or ec2_client(endpoint_url, region)
        return describe_instance_types(cl, names)
    except Exception as exc:
        raise _explain(exc, shown) from None


# --------------------------------------------------------------------------------------------- the overlay
def read_overlay(path: Path) -> list[InstanceType]:
    """The rows of the refreshed-instances overlay (none when the file does not exist)."""
    if not path.is_file():
        return []
    return parse_instances(path)


def overlay_document(rows: Sequence[InstanceType]) -> dict[str, Any]:
    """The overlay's YAML document: the loader's schema, one full row per size, grouped by family."""
    families: dict[str, list[dict[str, Any]]] = {}
    for inst in rows:
        row = inst.model_dump(mode="json", exclude_none=True)
        families.setdefault(row.pop("family"), []).append(row)
    return {
        "schema_version": SCHEMA_VERSION,
        "families": [{"family": fam, "sizes": sizes} for fam, sizes in families.items()],
    }


_HEADER = (
    "# Written by `accelbench catalog refresh-instances`: instance types read from EC2-compatible endpoints\n"
    "# (DescribeInstanceTypes), one full row per size with its provider, endpoint and region. Applied over the\n"
    "# shipped catalog and under hand-written instances/*.yaml files. Rewritten by every refresh (rows of\n"
    "# earlier refreshes are kept unless the same name is refreshed again); delete it to forget them.\n"
)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialise refreshes of one overlay (read, merge, write) across processes, where the OS allows."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_overlay(path: Path, rows: Sequence[InstanceType], data_dir: Path) -> None:
    """Write the overlay atomically, after checking that the catalog loads with it."""
    text = _HEADER + yaml.safe_dump(overlay_document(rows), sort_keys=False, allow_unicode=True, width=110)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".refreshed-", suffix=".yaml.tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)  # mkstemp makes it 0600
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        load_catalog(data_dir, refreshed=tmp)  # raises CatalogDataError and leaves the old file in place
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------------------------- the refresh
def refresh_instances(
    endpoint_url: str,
    region: str | None = None,
    instance_types: Sequence[str] | None = None,
    provider: str | None = None,
    *,
    client: Any = None,
    data_dir: Path | None = None,
    today: str | None = None,
) -> InstancesRefreshReport:
    """Read the endpoint's instance types, map them, merge them into the overlay and reload the catalog.

    ``region``: default the boto3 configuration's region, else us-east-1. ``provider``: default ``aws`` for an
    AWS endpoint host, else ``ec2-compatible``. Nothing is written when every type is skipped.
    """
    from accelbench.settings import get_settings

    endpoint_url = check_endpoint_url(endpoint_url)
    if region is None:
        region = _configured_region() or DEFAULT_REGION
    region = check_region(region)
    provider = check_provider(provider) if provider else default_provider(endpoint_url)
    names = split_names(instance_types) or None
    root = data_dir or get_settings().data_dir
    path = refreshed_instances_file(root)
    prov = Provenance(
        provider=provider,
        endpoint=redact_url(endpoint_url),
        region=region,
        date=today or dt.datetime.now(dt.UTC).date().isoformat(),
    )
    docs = fetch_instance_types(endpoint_url, region, names, client=client)
    report = InstancesRefreshReport(
        provider=provider, endpoint=prov.endpoint, region=region, date=prov.date, path=path
    )
    reported = [str(d.get("InstanceType") or "").lower() for d in docs]
    for wanted in names or []:
        if not fnmatch.filter(reported, wanted):
            report.skipped.append(Skipped(wanted, "the endpoint does not list it"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        reset_catalog_cache()
        catalog = load_catalog(root) if data_dir is not None else get_catalog()
        before = {i.name: i for i in catalog.instances}
        mapped: list[InstanceType] = []
        for doc in sorted(docs, key=lambda d: str(d.get("InstanceType") or "")):
            result = map_instance_type(doc, catalog, prov)
            if isinstance(result, Skipped):
                report.skipped.append(result)
                continue
            mapped.append(result)
            old = before.get(result.name)
            if old is None:
                report.rows.append(RowChange(result, "added"))
            else:
                diff = changes_between(old, result)
                report.rows.append(RowChange(result, "updated" if diff else "unchanged", diff))
        if mapped:
            rows = {i.name: i for i in read_overlay(path)}
            rows.update({i.name: i for i in mapped})
            write_overlay(path, list(rows.values()), root)
        reset_catalog_cache()
    if mapped:
        after = load_catalog(root) if data_dir is not None else get_catalog()
        for change in report.rows:
            change.shadowed_by_user_file = after.instance(change.instance.name) != change.instance
    return report


def _configured_region() -> str | None:
    try:
        import boto3

        return boto3.session.Session().region_name
    except Exception:
        return None
