"""Load the shipped catalog (instance types and accelerator specs) from versioned YAML data files.

The data lives in ``catalog/data/``: ``accelerators.yaml`` (one spec per device or CPU generation, each with
its sources) and ``instances/*.yaml`` (instance families with their sizes and an on-demand price snapshot).
Every row is validated into the domain types on load, and strictly: a misspelled key, a wrong type, an
accelerator name with no spec, a GPU row without GPUs or a CPU row with accelerator memory is an error that
names the file, the line, the row and the field. Users may add or override rows with their own files in
``<data_dir>/catalog/instances/*.yaml`` and ``<data_dir>/catalog/accelerators.yaml`` (same schema).
``accelbench catalog refresh-instances`` writes ``<data_dir>/catalog/refreshed-instances.yaml`` (same schema,
one full row per size with its provider, endpoint and region): it applies over the shipped rows and under the
hand-written ``instances/*.yaml`` files.

Instance files group rows by family so that what a family shares (architecture, accelerator, CPU
generation, ISA) is written once::

    schema_version: 1
    price_snapshot: {region: us-east-1, date: "2025-10-01", source: aws-price-list snapshot}
    families:
      - family: g6
        arch: x86_64
        accelerator_type: gpu
        accelerator_name: L4
        accelerator_memory_gib: 24
        sizes:
          - {name: g6.xlarge, vcpus: 4, memory_gib: 16, accelerator_count: 1, network_gbps: 10, on_demand_usd: 0.8048}

A size row may override any family field; the family's ``price_snapshot`` keys may be overridden per row
with ``price_date`` / ``price_source``. CPU topology: a family (or size) gives ``threads_per_core`` and each
size gets ``physical_cores = vcpus / threads_per_core`` unless it gives ``physical_cores`` itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType
from accelbench.errors import UserInputError
from accelbench.registry import did_you_mean
from accelbench.settings import get_settings

SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = frozenset({1})
DATA_DIR = Path(__file__).parent / "data"
_LINE_KEY = "__line__"
_SNAPSHOT_KEYS = {"region", "date", "source"}
_Row = TypeVar("_Row", bound=BaseModel)
REFRESHED_INSTANCES_NAME = "refreshed-instances.yaml"


class CatalogDataError(UserInputError):
    """A catalog data file is malformed. The message names the file, line, row and field."""


# --------------------------------------------------------------------------------------------- YAML reading
# The C loader when libyaml is present (the catalog is parsed on every fresh process; it is ~5x faster).
try:
    from yaml import CSafeLoader as _SafeBase
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _SafeBase  # type: ignore[assignment]


class _LineLoader(_SafeBase):
    """A safe YAML loader that remembers the line of every mapping, so errors can point at it."""


def _construct_mapping_with_line(loader: _LineLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    mapping: dict[Any, Any] = loader.construct_mapping(node, deep=True)
    mapping[_LINE_KEY] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping_with_line)


def _strip_lines(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_lines(v) for k, v in value.items() if k != _LINE_KEY}
    if isinstance(value, list):
        return [_strip_lines(v) for v in value]
    return value


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogDataError(f"Cannot read catalog file {path}: {exc.strerror or exc}.") from None
    try:
        doc = yaml.load(text, Loader=_LineLoader)  # _LineLoader derives from SafeLoader
    except yaml.YAMLError as exc:
        raise CatalogDataError(f"{path.name}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise CatalogDataError(f"{path.name}: expected a mapping with schema_version at the top.")
    version = doc.get("schema_version")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise CatalogDataError(
            f"{path.name}: schema_version {version!r} is not supported.",
            hint=f"Supported: {', '.join(str(v) for v in sorted(SUPPORTED_SCHEMA_VERSIONS))}.",
        )
    return doc


def _where(path: Path, line: Any, row: str) -> str:
    return f"{path.name} line {line}, {row}" if isinstance(line, int) else f"{path.name}, {row}"


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(row)"
        parts.append(f"field {loc!r}: {err['msg']}")
    return "; ".join(parts)


def _mapping_rows(path: Path, rows: list[Any], what: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Each row with where it stands (file, line, ``what`` and its number and name), for error messages; a
    row that is not a mapping is an error."""
    for i, raw in enumerate(rows, start=1):
        if not isinstance(raw, dict):
            raise CatalogDataError(f"{path.name}: {what} {i} must be a mapping.")
        yield raw, _where(path, raw.get(_LINE_KEY), f"{what} {i} ({raw.get('name', '?')})")


def _validated(model: type[_Row], row: dict[str, Any], where: str) -> _Row:
    """``row`` as a ``model``; a field the model refuses is a catalog error at ``where``."""
    try:
        return model.model_validate(row)
    except ValidationError as exc:
        raise CatalogDataError(f"{where}: {_validation_message(exc)}") from None


# --------------------------------------------------------------------------------------------- parsing
def parse_accelerators(path: Path) -> list[AcceleratorSpec]:
    """Read one accelerators file into specs (strict)."""
    doc = _read_yaml(path)
    _check_top_keys(path, doc, {"schema_version", "accelerators"})
    rows = doc.get("accelerators")
    if not isinstance(rows, list):
        raise CatalogDataError(f"{path.name}: 'accelerators' must be a list of specs.")
    specs: list[AcceleratorSpec] = []
    for raw, where in _mapping_rows(path, rows, "accelerator row"):
        spec = _validated(AcceleratorSpec, _strip_lines(raw), where)
        _check_accelerator(spec, where)
        specs.append(spec)
    return specs


def _check_accelerator(spec: AcceleratorSpec, where: str) -> None:
    def bad(field_name: str, why: str) -> CatalogDataError:
        return CatalogDataError(f"{where}: field {field_name!r}: {why}")

    if spec.memory_bandwidth_gbps <= 0:
        raise bad("memory_bandwidth_gbps", "must be positive.")
    if spec.bf16_tflops <= 0:
        raise bad("bf16_tflops", "must be positive.")
    if not spec.sources:
        raise bad("sources", "every spec needs at least one source (title, url, accessed).")
    if spec.kind == AcceleratorType.cpu:
        if spec.memory_gib != 0:
            raise bad("memory_gib", "must be 0 for a CPU (host DRAM is the serving memory).")
        if (spec.l2_outstanding_misses is None) != (spec.dram_latency_ns is None):
            raise bad(
                "l2_outstanding_misses" if spec.l2_outstanding_misses is None else "dram_latency_ns",
                "l2_outstanding_misses and dram_latency_ns derive per_core_bandwidth_gbps together; give both.",
            )
        for name in (
            "cores_per_socket",
            "memory_channels",
            "per_core_bandwidth_gbps",
            "per_core_bf16_gflops",
        ):
            if not getattr(spec, name):
                why = "is required for a CPU spec"
                if name == "per_core_bandwidth_gbps":
                    why += " (or l2_outstanding_misses and dram_latency_ns, which derive it)"
                raise bad(name, why + ".")
        if not spec.isa:
            raise bad("isa", "a CPU spec must list its ISA extensions.")
    else:
        if spec.memory_gib <= 0:
            raise bad("memory_gib", f"a {spec.kind.value} device needs its memory capacity.")
        reported = spec.memory_reported_gib
        if reported is not None and not 0.85 * spec.memory_gib <= reported <= spec.memory_gib:
            raise bad(
                "memory_reported_gib",
                f"{reported:g} GiB is not what CUDA reports of a {spec.memory_gib:g} GiB part (between 85% "
                "and 100% of memory_gib); give the total_memory a log prints.",
            )
        if spec.kind == AcceleratorType.neuron and not spec.neuron_cores:
            raise bad("neuron_cores", "a Neuron device needs its NeuronCore count.")
    if spec.supports_fp8_kv and spec.fp8_tflops is None:
        raise bad("supports_fp8_kv", "FP8 KV cache needs FP8 support (fp8_tflops).")


def _check_top_keys(path: Path, doc: dict[str, Any], allowed: set[str]) -> None:
    extra = set(doc) - allowed - {_LINE_KEY}
    if extra:
        raise CatalogDataError(
            f"{path.name}: unknown top-level key(s) {', '.join(sorted(extra))}.",
            hint=f"Allowed: {', '.join(sorted(allowed))}.",
        )


def parse_instances(path: Path) -> list[InstanceType]:
    """Read one instances file (families with sizes) into instance types (strict, before cross-checks)."""
    doc = _read_yaml(path)
    _check_top_keys(path, doc, {"schema_version", "price_snapshot", "families"})
    snapshot = _strip_lines(doc.get("price_snapshot") or {})
    if not isinstance(snapshot, dict) or set(snapshot) - _SNAPSHOT_KEYS:
        raise CatalogDataError(
            f"{path.name}: price_snapshot must be a mapping of {', '.join(sorted(_SNAPSHOT_KEYS))}."
        )
    families = doc.get("families")
    if not isinstance(families, list):
        raise CatalogDataError(f"{path.name}: 'families' must be a list.")
    out: list[InstanceType] = []
    for fi, fam in enumerate(families, start=1):
        if not isinstance(fam, dict):
            raise CatalogDataError(f"{path.name}: family {fi} must be a mapping.")
        fam_name = fam.get("family", f"#{fi}")
        sizes = fam.get("sizes")
        if not isinstance(sizes, list) or not sizes:
            raise CatalogDataError(
                f"{_where(path, fam.get(_LINE_KEY), f'family {fam_name}')}: 'sizes' must be a non-empty list."
            )
        shared = {k: v for k, v in fam.items() if k not in ("sizes", _LINE_KEY)}
        for size, where in _mapping_rows(path, sizes, f"family {fam_name}, size"):
            row: dict[str, Any] = {**shared, **_strip_lines(size)}
            _derive_physical_cores(row, where)
            if row.get("on_demand_usd") is not None:
                row.setdefault("price_region", snapshot.get("region"))
                row.setdefault("price_date", snapshot.get("date"))
                row.setdefault("price_source", snapshot.get("source"))
            inst = _validated(InstanceType, row, where)
            _check_instance_row(inst, where)
            out.append(inst)
    return out


def _derive_physical_cores(row: dict[str, Any], where: str) -> None:
    """``physical_cores`` = vcpus / threads_per_core when a row (or its family) gives the threads but not the
    cores; a vCPU count the threads do not divide is an error rather than a rounded guess."""
    tpc, vcpus = row.get("threads_per_core"), row.get("vcpus")
    if row.get("physical_cores") is not None or type(tpc) is not int or type(vcpus) is not int:
        return
    if tpc < 1 or vcpus < 1:
        return  # the model's own bounds report it
    if vcpus % tpc:
        raise CatalogDataError(
            f"{where}: field 'threads_per_core': {vcpus} vCPUs are not a whole number of {tpc}-thread cores.",
            hint="Give physical_cores on the size row.",
        )
    row["physical_cores"] = vcpus // tpc


def _check_instance_row(inst: InstanceType, where: str) -> None:
    def bad(field_name: str, why: str) -> CatalogDataError:
        return CatalogDataError(f"{where}: field {field_name!r}: {why}")

    prefix, _, size = inst.name.partition(".")
    if not size:
        raise bad("name", "expected FAMILY.SIZE, e.g. g6.xlarge.")
    if prefix != inst.family:
        raise bad("family", f"{inst.name!r} is not in family {inst.family!r}.")
    if inst.accelerator_type == AcceleratorType.cpu:
        if inst.accelerator_count != 0:
            raise bad("accelerator_count", "must be 0 for a CPU instance.")
        if inst.accelerator_memory_gib != 0:
            raise bad("accelerator_memory_gib", "must be 0 for a CPU instance (host DRAM serves).")
        if not inst.cpu_generation:
            raise bad("cpu_generation", "a CPU instance must name its CPU generation.")
        if not inst.cpu_isa:
            raise bad("cpu_isa", "a CPU instance must list its ISA extensions.")
    else:
        if inst.accelerator_count < 1:
            raise bad(
                "accelerator_count", f"a {inst.accelerator_type.value} instance needs at least 1 device."
            )
        if inst.accelerator_memory_gib <= 0:
            raise bad("accelerator_memory_gib", "must be the per-device memory (> 0).")
    if inst.on_demand_usd is not None:
        if inst.on_demand_usd <= 0:
            raise bad("on_demand_usd", "a price must be positive (leave it out when unknown).")
        for name in ("price_region", "price_date", "price_source"):
            if not getattr(inst, name):
                raise bad(name, "a snapshot price needs region, date and source (set price_snapshot).")


# --------------------------------------------------------------------------------------------- the catalog
@dataclass(frozen=True)
class Catalog:
    """Instance types and accelerator specs, cross-checked. Get the shared one with :func:`get_catalog`."""

    instances: list[InstanceType]
    accelerators: dict[str, AcceleratorSpec]
    sources: list[str] = field(default_factory=list)

    @cached_property
    def _by_name(self) -> dict[str, InstanceType]:
        return {i.name: i for i in self.instances}

    @cached_property
    def _accel_by_lower(self) -> dict[str, AcceleratorSpec]:
        return {k.lower(): v for k, v in self.accelerators.items()}

    def __iter__(self) -> Iterator[InstanceType]:
        return iter(self.instances)

    def __len__(self) -> int:
        return len(self.instances)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip().lower() in self._by_name

    def names(self) -> list[str]:
        return [i.name for i in self.instances]

    def families(self) -> list[str]:
        return sorted({i.family for i in self.instances})

    def instance(self, name: str) -> InstanceType:
        """The instance type called ``name`` (case-insensitive); NotFoundError with suggestions otherwise."""
        key = name.strip().lower()
        try:
            return self._by_name[key]
        except KeyError:
            raise did_you_mean(name, self.names(), "instance type") from None

    def accelerator(self, name: str) -> AcceleratorSpec:
        """The spec of an accelerator (or CPU generation) by name, e.g. ``H100-SXM`` or ``Graviton4``."""
        try:
            return self._accel_by_lower[name.strip().lower()]
        except KeyError:
            raise did_you_mean(name, list(self.accelerators), "accelerator") from None

    def accelerator_for(self, instance: InstanceType | str) -> AcceleratorSpec:
        """The spec behind an instance type (its GPU, Neuron device or CPU)."""
        inst = self.instance(instance) if isinstance(instance, str) else instance
        return self.accelerator(inst.accelerator_name)

    def filter(
        self,
        accelerator_type: AcceleratorType | str | None = None,
        family: str | Iterable[str] | None = None,
        min_memory_gib: float | None = None,
        max_price: float | None = None,
        arch: str | None = None,
        *,
        prices: Mapping[str, float] | None = None,
    ) -> list[InstanceType]:
        """Instance types matching every given condition, in catalog order.

        ``min_memory_gib`` is the serving memory: total accelerator memory for GPU and Neuron, host memory
        for CPU. ``max_price`` compares the snapshot on-demand price, or the hourly price in ``prices``
        (instance name -> USD/h, e.g. from ``price_map`` with a store) when given; rows without a price are
        dropped.
        ``family`` takes one family or several. Unknown families and accelerator types raise a
        NotFoundError with suggestions rather than returning nothing silently.
        """
        kind: AcceleratorType | None = None
        if accelerator_type is not None:
            try:
                kind = AcceleratorType(str(accelerator_type).lower())
            except ValueError:
                raise did_you_mean(
                    str(accelerator_type), [t.value for t in AcceleratorType], "accelerator type"
                ) from None
        fams: set[str] | None = None
        if family is not None:
            fams = {family.lower()} if isinstance(family, str) else {f.lower() for f in family}
            known = set(self.families())
            for f in sorted(fams - known):
                raise did_you_mean(f, sorted(known), "instance family")
        if arch is not None:
            arch = _normalise_arch(arch)
        out = []
        for inst in self.instances:
            if kind is not None and inst.accelerator_type != kind:
                continue
            if fams is not None and inst.family not in fams:
                continue
            if arch is not None and inst.arch != arch:
                continue
            if min_memory_gib is not None and serving_memory_gib(inst) < min_memory_gib:
                continue
            if max_price is not None:
                usd = prices.get(inst.name) if prices is not None else inst.on_demand_usd
                if usd is None or usd > max_price:
                    continue
            out.append(inst)
        return out


def serving_memory_gib(inst: InstanceType) -> float:
    """Memory that holds weights and KV cache: accelerator memory, or host DRAM on a CPU instance."""
    if inst.accelerator_type == AcceleratorType.cpu:
        return inst.memory_gib
    return inst.total_accelerator_memory_gib


_ARCH_ALIASES = {"x86_64": "x86_64", "x86": "x86_64", "amd64": "x86_64", "arm64": "arm64", "aarch64": "arm64"}


def _normalise_arch(arch: str) -> str:
    try:
        return _ARCH_ALIASES[arch.strip().lower()]
    except KeyError:
        raise did_you_mean(arch, list(_ARCH_ALIASES), "architecture") from None


def build_catalog(
    instance_files: Iterable[Path], accelerator_files: Iterable[Path], *, allow_override: bool = False
) -> Catalog:
    """Load files into a cross-checked catalog.

    Within the given files a name must be unique. ``allow_override`` is for user files layered over the
    shipped ones: a later file's row replaces an earlier row with the same name.
    """
    inst_files, accel_files = list(instance_files), list(accelerator_files)
    accelerators: dict[str, AcceleratorSpec] = {}
    accel_origin: dict[str, str] = {}
    for path in accel_files:
        for spec in parse_accelerators(path):
            key = spec.name
            if key in accelerators and not allow_override:
                raise CatalogDataError(
                    f"{path.name}: accelerator {key!r} is defined twice (also in {accel_origin[key]})."
                )
            accelerators[key], accel_origin[key] = spec, path.name
    instances: dict[str, InstanceType] = {}
    origin: dict[str, str] = {}
    for path in inst_files:
        for inst in parse_instances(path):
            if inst.name in instances and not allow_override:
                raise CatalogDataError(
                    f"{path.name}: instance type {inst.name!r} is defined twice (also in {origin[inst.name]})."
                )
            instances[inst.name], origin[inst.name] = inst, path.name
    for inst in instances.values():
        where = f"{origin[inst.name]}: instance {inst.name}"
        found = accelerators.get(inst.accelerator_name)
        if found is None:
            raise CatalogDataError(
                f"{where}: field 'accelerator_name': no accelerator spec called {inst.accelerator_name!r}.",
                hint="Known: " + ", ".join(sorted(accelerators)),
            )
        spec = found
        if spec.kind != inst.accelerator_type:
            raise CatalogDataError(
                f"{where}: field 'accelerator_type': {inst.accelerator_type.value!r} but "
                f"{spec.name} is a {spec.kind.value} spec."
            )
        if spec.kind != AcceleratorType.cpu and abs(spec.memory_gib - inst.accelerator_memory_gib) > 0.5:
            raise CatalogDataError(
                f"{where}: field 'accelerator_memory_gib': {inst.accelerator_memory_gib} GiB per device "
                f"but the {spec.name} spec says {spec.memory_gib} GiB."
            )
    return Catalog(
        instances=list(instances.values()),
        accelerators=accelerators,
        sources=[p.name for p in accel_files + inst_files],
    )


def shipped_files() -> tuple[list[Path], list[Path]]:
    """The instance files and the accelerator files shipped in the package."""
    return sorted((DATA_DIR / "instances").glob("*.yaml")), [DATA_DIR / "accelerators.yaml"]


def refreshed_instances_file(data_dir: Path) -> Path:
    """The overlay ``accelbench catalog refresh-instances`` writes: rows read from EC2-compatible endpoints."""
    return data_dir / "catalog" / REFRESHED_INSTANCES_NAME


def user_files(data_dir: Path) -> tuple[list[Path], list[Path]]:
    """Optional user files that add to or override the shipped catalog, in the order they apply: the
    refreshed-instances overlay, then the hand-written ``instances/*.yaml`` (so a hand-written row has the
    last word)."""
    root = data_dir / "catalog"
    refreshed = refreshed_instances_file(data_dir)
    inst = [refreshed] if refreshed.is_file() else []
    inst += sorted((root / "instances").glob("*.yaml")) if (root / "instances").is_dir() else []
    accel = [root / "accelerators.yaml"] if (root / "accelerators.yaml").is_file() else []
    return inst, accel


def load_catalog(data_dir: Path | None = None, *, refreshed: Path | None = None) -> Catalog:
    """Load the shipped catalog, plus user files under ``data_dir/catalog`` when given (no caching).

    ``refreshed`` stands in for the refreshed-instances overlay (a refresh checks its new file this way
    before putting it in place).
    """
    inst, accel = shipped_files()
    if data_dir is not None:
        u_inst, u_accel = user_files(data_dir)
        if refreshed is not None:
            current = refreshed_instances_file(data_dir)
            u_inst = [refreshed] + [p for p in u_inst if p != current]
        if u_inst or u_accel:
            # Shipped files are checked on their own first, so a duplicate there is never hidden by override.
            build_catalog(inst, accel)
            return build_catalog(inst + u_inst, accel + u_accel, allow_override=True)
    return build_catalog(inst, accel)


_cache: dict[str, tuple[tuple[int, int] | None, Catalog]] = {}
_cache_lock = threading.Lock()


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def get_catalog() -> Catalog:
    """The catalog (shipped data plus the user's files under the data dir), loaded once per data dir.

    It is loaded again when the refreshed-instances overlay changes (a refresh in another process, e.g. the
    CLI while ``accelbench serve`` runs); after editing hand-written files call :func:`reset_catalog_cache`.
    """

    data_dir = get_settings().data_dir
    key = str(data_dir)
    stamp = _stamp(refreshed_instances_file(data_dir))
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        cat = load_catalog(data_dir)
        _cache[key] = (stamp, cat)
        return cat


def reset_catalog_cache() -> None:
    """Forget loaded catalogs (after editing user catalog files, or between tests)."""
    with _cache_lock:
        _cache.clear()
