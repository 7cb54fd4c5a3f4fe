"""What the Catalog page shows: the instance table with its search, tier filter and sort keys, and one instance
type's detail (its accelerator or CPU specs, the sources the catalog cites, every known price with its date and
source). Pure functions over catalog objects and prices, so the page's rules are tested without a browser; the
two ``*_context`` loaders at the bottom are all the route calls (they read the catalog and the store's prices).

The search is the same rule here (``?q=``, the page without script) and in ``static/catalog.js`` (as you type):
the query is split into words, and a row matches when every word occurs in its ``search`` text. Which price is
"the" price of a tier is not decided here but by ``catalog/pricing.py`` (``price_for``: the store's when at
least as new as the shipped snapshot)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType, Price, PriceTier
from accelbench.errors import UserInputError
from accelbench.report.formatting import MISSING, fmt_num, fmt_usd
from accelbench.services.instances import InstancePrices, catalog_table, instance_prices, serving_memory_gib
from accelbench.services.session import Store
from accelbench.web.views import TIER_LABEL

#: the table's sortable columns: (key, header, kind); "num" sorts numerically, blanks last either way
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("name", "Instance", "text"),
    ("tier", "Tier", "text"),
    ("accelerator", "Accelerator / CPU", "text"),
    ("serving_memory_gib", "Serving memory (GiB)", "num"),
    ("vcpus", "vCPUs", "num"),
    ("cores", "Cores", "num"),
    ("memory_gib", "Memory (GiB)", "num"),
    ("arch", "Arch", "text"),
    ("isa", "ISA", "text"),
    ("price", "On-demand $/h", "num"),
)
COLUMN_KEYS = frozenset(key for key, _, _ in COLUMNS)
NUMERIC_KEYS = frozenset(key for key, _, kind in COLUMNS if kind == "num")
DIRECTIONS = {"asc": "ascending", "desc": "descending"}
#: a query longer than this many words is cut (the route bounds its length too)
MAX_TERMS = 12
PRICE_TIER_LABEL = {
    PriceTier.on_demand: "On-demand",
    PriceTier.reserved_1yr: "Reserved 1 yr (standard, all upfront, per hour)",
    PriceTier.reserved_3yr: "Reserved 3 yr (standard, all upfront, per hour)",
}
#: the hours a month of continuous use is priced at (AWS's own convention: 730 h)
HOURS_PER_MONTH = 730
#: the region the shipped snapshot prices and the catalog table ranks by (catalog/pricing.py SNAPSHOT_REGION)
TABLE_REGION = "us-east-1"


# ------------------------------------------------------------------------------------------- search
def query_terms(q: str | None) -> list[str]:
    """The words of a search, lower-cased; every one must occur in a row (so "cpu amx" narrows, not widens)."""
    return (q or "").lower().split()[:MAX_TERMS]


def search_text(inst: InstanceType, spec: AcceleratorSpec | None) -> str:
    """What a query is matched against: the names a reader would type (instance, family, tier, device or CPU
    model and vendor, architecture with its aliases, ISA flags, provider)."""
    tier = inst.accelerator_type.value
    words = [inst.name, inst.family, tier, TIER_LABEL[tier], inst.accelerator_name, inst.provider, inst.arch]
    # a reader may spell the architecture the other way ("aarch64", "amd64")
    words.append("aarch64" if inst.arch == "arm64" else "amd64")
    if inst.cpu_generation:
        words.append(inst.cpu_generation)
    words += inst.cpu_isa
    if spec is not None:
        words.append(spec.vendor)
        if spec.kind == AcceleratorType.cpu:
            words += spec.isa
    return " ".join(w for w in words if w).lower()


def matches(row: Mapping[str, Any], terms: Sequence[str], tier: str | None = None) -> bool:
    """Whether a table row is shown: in the tier (None or "all": any) and containing every search word."""
    if tier not in (None, "all") and row["tier"] != tier:
        return False
    text: str = row["search"]
    return all(term in text for term in terms)


# ------------------------------------------------------------------------------------------- sorting
_DIGITS = re.compile(r"(\d+)")


def _natural(text: str) -> tuple[tuple[int, int, str], ...]:
    """Text with its numbers compared as numbers ("g6.2xlarge" before "g6.12xlarge"), as the page script's
    ``localeCompare(..., {numeric: true})`` does."""
    return tuple(
        (1, int(part), "") if part.isdigit() else (0, 0, part) for part in _DIGITS.split(text.lower()) if part
    )


def sort_rows(rows: Sequence[Mapping[str, Any]], key: str, descending: bool = False) -> list[dict[str, Any]]:
    """The rows ordered by one column's sort value (numbers as numbers, text naturally), ties in catalog order
    and blanks last in either direction, as ``static/sortable.js`` orders them in the browser."""
    if key not in COLUMN_KEYS:
        raise UserInputError(f"Cannot sort by {key!r}.", hint="Columns: " + ", ".join(sorted(COLUMN_KEYS)))
    numeric = key in NUMERIC_KEYS
    present = [dict(r) for r in rows if r["sort"][key] not in (None, "")]
    blank = [dict(r) for r in rows if r["sort"][key] in (None, "")]

    def value(row: Mapping[str, Any]) -> Any:
        v = row["sort"][key]
        return float(v) if numeric else _natural(str(v))

    # sorted() is stable, so equal values keep catalog order in both directions (as the script does)
    return sorted(present, key=value, reverse=descending) + blank


# ------------------------------------------------------------------------------------------- table rows
def accelerator_text(inst: InstanceType) -> str:
    """ "4 x L4" for accelerator instances, the CPU generation for CPU ones."""
    if inst.accelerator_type == AcceleratorType.cpu:
        return inst.cpu_generation or inst.accelerator_name
    return f"{inst.accelerator_count} x {inst.accelerator_name}"


def detail_href(name: str) -> str:
    return "/catalog/" + quote(name, safe="")


def is_estimate(price: Price | None) -> bool:
    """A price the catalog itself marks as an estimate, not a published figure (its source says so)."""
    return price is not None and price.source.lower().startswith("estimate")


def catalog_row(inst: InstanceType, spec: AcceleratorSpec | None, price: Price | None) -> dict[str, Any]:
    """One table row: the shown values, the sort value of each column, and the search text."""
    tier = inst.accelerator_type.value
    row: dict[str, Any] = {
        "name": inst.name,
        "href": detail_href(inst.name),
        "family": inst.family,
        "tier": tier,
        "tier_label": TIER_LABEL[tier],
        "accelerator": accelerator_text(inst),
        "serving_memory_gib": serving_memory_gib(inst),
        "vcpus": inst.vcpus,
        # only what the catalog states (physical_cores, or vcpus / threads_per_core there): never a guess
        "cores": inst.physical_cores,
        "memory_gib": inst.memory_gib,
        "arch": inst.arch,
        "isa": ", ".join(inst.cpu_isa),
        "price": price.usd_per_hour if price else None,
        "price_date": price.effective_date if price else None,
        "price_source": price.source if price else None,
        "price_region": price.region if price else None,
        "price_estimated": is_estimate(price),
        "search": search_text(inst, spec),
    }
    row["price_title"] = (
        f"{price.source}, {price.region}, dated {price.effective_date}" if price else "no known price"
    )
    row["sort"] = {key: row[key] if key != "tier" else row["tier_label"] for key in COLUMN_KEYS}
    return row


def catalog_rows(
    instances: Sequence[InstanceType],
    accelerators: Mapping[str, AcceleratorSpec],
    prices: Mapping[str, Price],
) -> list[dict[str, Any]]:
    """Every instance type's row, in catalog order; ``prices`` is the best on-demand price by name."""
    return [catalog_row(i, accelerators.get(i.accelerator_name), prices.get(i.name)) for i in instances]


def count_text(shown: int, total: int) -> str:
    return f"{shown} of {total} instance types"


def price_summary(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where the table's prices come from, by source, the most rows first, with their dates ("182
    aws-price-list snapshot, 2026-01-19 to 2026-06-01"), and how many rows have none; so a reader sees at
    once how old the prices are and which are estimates."""
    counts: Counter[str] = Counter()
    dates: dict[str, list[str]] = {}
    for r in rows:
        if r["price"] is not None:
            counts[r["price_source"]] += 1
            dates.setdefault(r["price_source"], []).append(r["price_date"])
    lines = []
    for source, n in counts.most_common():
        first, last = min(dates[source]), max(dates[source])
        lines.append(f"{n} {source}, {first}" + (f" to {last}" if last != first else ""))
    missing = sum(1 for r in rows if r["price"] is None)
    if missing:
        lines.append(f"{missing} without a known price")
    return lines


def page_url(
    tier: str | None = None, q: str = "", sort: str | None = None, direction: str | None = None
) -> str:
    """The Catalog page's address for a view (the same parameters the script writes into the address bar)."""
    params = [
        (name, value)
        for name, value in (("accelerator_type", tier), ("q", q.strip()), ("sort", sort), ("dir", direction))
        if value and value != "all"
    ]
    return "/catalog" + (f"?{urlencode(params)}" if params else "")


def catalog_page_view(
    rows: Sequence[Mapping[str, Any]],
    *,
    q: str | None = None,
    tier: str | None = None,
    sort: str | None = None,
    direction: str | None = None,
) -> dict[str, Any]:
    """The page: every row (those that do not match flagged ``shown=False``, so the script can show them again
    without a reload), in the asked order, the count, the column headers with their ``aria-sort``, the chips'
    links (keeping the search and sort) and the price summary."""
    if direction is not None and direction not in DIRECTIONS:
        raise UserInputError(f"dir {direction!r} is not one of {', '.join(DIRECTIONS)}.")
    tier = tier or "all"
    query = (q or "").strip()
    terms = query_terms(query)
    ordered = sort_rows(rows, sort, direction == "desc") if sort else [dict(r) for r in rows]
    for row in ordered:
        row["shown"] = matches(row, terms, tier)
    shown = sum(1 for r in ordered if r["shown"])
    columns = [
        {
            "key": key,
            "title": title,
            "kind": kind,
            "aria_sort": DIRECTIONS[direction or "asc"] if key == sort else "none",
        }
        for key, title, kind in COLUMNS
    ]
    chips = [
        {
            "key": key,
            "label": label,
            "on": key == tier,
            "href": page_url(key, query, sort, direction if sort else None),
        }
        for key, label in (("all", "All"), *((t, TIER_LABEL[t]) for t in ("gpu", "neuron", "cpu")))
    ]
    return {
        "rows": ordered,
        "columns": columns,
        "chips": chips,
        "selected": tier,
        "q": query,
        "sort": sort,
        "dir": direction if sort else None,
        "shown": shown,
        "total": len(ordered),
        "count_text": count_text(shown, len(ordered)),
        "price_summary": price_summary(rows),
        "region": TABLE_REGION,
    }


# ------------------------------------------------------------------------------------------- detail
def _fact(label: str, value: Any, unit: str = "", digits: int = 0, note: str = "") -> dict[str, str]:
    """One spec line: the value written for people ("-" when the catalog does not say), its unit, a note."""
    if value is None or value == "" or value == []:
        text = MISSING
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, int | float):
        text = fmt_num(value, digits) + (f" {unit}" if unit else "")
    elif isinstance(value, list):
        text = ", ".join(str(v) for v in value)
    else:
        text = str(value)
    # a note explains a figure; beside "-" it would read as if it described one
    return {"label": label, "value": text, "note": note if text != MISSING else ""}


def _digits(value: float | None) -> int:
    """Whole numbers without decimals, others with one (TFLOPS like 36.9, bandwidth like 307.2)."""
    return 0 if value is None or float(value).is_integer() else 1


def _times(count: int, value: float | None) -> float | None:
    return None if value is None else count * value


def instance_facts(inst: InstanceType) -> list[dict[str, str]]:
    """The instance type itself: what the cloud sells (vCPUs, memory, network) and how its CPU is made."""
    cpu = inst.accelerator_type == AcceleratorType.cpu
    facts = [
        _fact("Provider", inst.provider),
        _fact("Family", inst.family),
        _fact("vCPUs", inst.vcpus),
        _fact("Physical cores", inst.physical_cores),
        _fact("Threads per core", inst.threads_per_core),
        _fact("Memory", inst.memory_gib, "GiB", _digits(inst.memory_gib)),
        _fact(
            "Serving memory",
            serving_memory_gib(inst),
            "GiB",
            _digits(serving_memory_gib(inst)),
            "host DRAM: a CPU instance serves from it" if cpu else "accelerator memory, all devices",
        ),
        _fact("Architecture", inst.arch),
        _fact("NUMA nodes (sockets)", inst.numa_nodes),
        _fact("Network", inst.network_gbps or None, "Gbps", _digits(inst.network_gbps)),
    ]
    if cpu or inst.cpu_generation:
        facts.append(_fact("CPU generation", inst.cpu_generation))
    if cpu or inst.cpu_isa:
        facts.append(_fact("ISA flags", inst.cpu_isa))
    if cpu:
        facts.append(
            _fact("Measured DRAM read", inst.memory_read_gbps, "GB/s", 0, inst.memory_read_source or "")
        )
    if inst.arch == "x86_64" and inst.cpu_isa:
        facts.append(_fact("AMX", any(f.startswith("amx") for f in inst.cpu_isa)))
    if inst.refreshed_from:
        facts.append(
            _fact("Read from", inst.refreshed_from, note=f"DescribeInstanceTypes, {inst.refreshed_region}")
        )
        facts.append(_fact("Read on", inst.refreshed_date))
    return facts


def accelerator_facts(inst: InstanceType, spec: AcceleratorSpec) -> list[dict[str, str]]:
    """A GPU or Neuron instance's devices: per device and, where it adds up, for the instance."""
    n = inst.accelerator_count
    facts = [
        _fact("Device", spec.name),
        _fact("Vendor", spec.vendor),
        _fact("Count", n),
        _fact("Memory per device", spec.memory_gib, "GiB", _digits(spec.memory_gib)),
        _fact("Memory, all devices", inst.total_accelerator_memory_gib, "GiB"),
        _fact(
            "Memory bandwidth per device",
            spec.memory_bandwidth_gbps,
            "GB/s",
            _digits(spec.memory_bandwidth_gbps),
        ),
        _fact("Memory bandwidth, all devices", _times(n, spec.memory_bandwidth_gbps), "GB/s"),
        _fact("BF16 per device", spec.bf16_tflops, "TFLOPS", _digits(spec.bf16_tflops), "dense peak"),
        _fact("FP16 per device", spec.fp16_tflops, "TFLOPS", _digits(spec.fp16_tflops), "dense peak"),
        _fact("FP8 per device", spec.fp8_tflops, "TFLOPS", _digits(spec.fp8_tflops), "dense peak"),
        _fact("INT8 per device", spec.int8_tops, "TOPS", _digits(spec.int8_tops), "dense peak"),
        _fact("BF16, all devices", _times(n, spec.bf16_tflops), "TFLOPS", _digits(spec.bf16_tflops)),
        _fact(
            "Interconnect per device",
            spec.interconnect_gbps,
            "GB/s",
            _digits(spec.interconnect_gbps),
            "NVLink / NeuronLink, device to device",
        ),
        _fact(
            "PCIe generation", spec.pcie_gen, note="what tensor-parallel all-reduces run over without NVLink"
        ),
        _fact("FP8 KV cache", spec.supports_fp8_kv),
    ]
    if spec.kind == AcceleratorType.neuron:
        facts.append(_fact("NeuronCores per device", spec.neuron_cores))
        facts.append(
            _fact(
                "Logical NeuronCores per device",
                spec.neuron_logical_cores or spec.neuron_cores,
                note="as the runtime exposes them by default",
            )
        )
    return facts


def cpu_facts(spec: AcceleratorSpec) -> list[dict[str, str]]:
    """A CPU instance's processor, as the spec gives it: per socket and per core."""
    return [
        _fact("CPU spec", spec.name),
        _fact("Vendor", spec.vendor),
        _fact("Cores per socket", spec.cores_per_socket),
        _fact("Memory channels per socket", spec.memory_channels),
        _fact(
            "Memory bandwidth per socket",
            spec.memory_bandwidth_gbps,
            "GB/s",
            _digits(spec.memory_bandwidth_gbps),
            "peak",
        ),
        _fact(
            "Memory bandwidth per core",
            spec.per_core_bandwidth_gbps,
            "GB/s",
            _digits(spec.per_core_bandwidth_gbps),
            "what one core streams from DRAM, approximate",
        ),
        _fact("BF16 per socket", spec.bf16_tflops, "TFLOPS", _digits(spec.bf16_tflops), "dense peak"),
        _fact("BF16 per core", spec.per_core_bf16_gflops, "GFLOPS", _digits(spec.per_core_bf16_gflops)),
        _fact("FP16 per socket", spec.fp16_tflops, "TFLOPS", _digits(spec.fp16_tflops)),
        _fact("INT8 per socket", spec.int8_tops, "TOPS", _digits(spec.int8_tops)),
        _fact("ISA (the generation's)", spec.isa),
    ]


def safe_url(url: str | None) -> str | None:
    """A cited address to link to: http(s) only (a user's catalog file could hold anything)."""
    return url if url and url.lower().startswith(("https://", "http://")) else None


def source_rows(inst: InstanceType, spec: AcceleratorSpec) -> list[dict[str, Any]]:
    """What the catalog cites for this row: the spec's sources (title, address, date read), then where the
    instance row itself was read from when a refresh wrote it."""
    rows = [
        {"title": s.title, "url": safe_url(s.url), "text_url": s.url, "accessed": s.accessed or MISSING}
        for s in spec.sources
    ]
    if inst.refreshed_from:
        rows.append(
            {
                "title": f"DescribeInstanceTypes ({inst.refreshed_region or MISSING})",
                "url": None,
                "text_url": inst.refreshed_from,
                "accessed": inst.refreshed_date or MISSING,
            }
        )
    return rows


def _same(a: Price, b: Price | None) -> bool:
    return b is not None and (a.region, a.tier, a.effective_date, a.source, a.usd_per_hour) == (
        b.region,
        b.tier,
        b.effective_date,
        b.source,
        b.usd_per_hour,
    )


def price_rows(
    snapshot: Price | None, stored: Sequence[Price], best: Mapping[PriceTier, Price]
) -> list[dict[str, Any]]:
    """Every known price of one instance type: the shipped snapshot and the store's newest per region and tier,
    each with its date and source; ``in_use`` marks the one the planner and the table use for its tier in
    the table's region (``best``, from ``catalog.prices_for``). The table's region first, then by tier."""
    known: list[tuple[Price, str]] = [(p, "store (refresh-prices)") for p in stored]
    if snapshot is not None:
        known.append((snapshot, "shipped catalog snapshot"))
    tiers = list(PriceTier)
    # newest first within a region and tier: sort by date, then (stable) by region and tier
    known.sort(key=lambda pair: pair[0].effective_date, reverse=True)
    known.sort(key=lambda pair: (pair[0].region != TABLE_REGION, pair[0].region, tiers.index(pair[0].tier)))
    return [
        {
            "tier": p.tier.value,
            "tier_label": PRICE_TIER_LABEL[p.tier],
            "region": p.region,
            "usd_per_hour": p.usd_per_hour,
            "usd_per_month": p.usd_per_hour * HOURS_PER_MONTH,
            "effective_date": p.effective_date,
            "source": p.source,
            "origin": origin,
            "estimated": is_estimate(p),
            "in_use": p.region == TABLE_REGION and _same(p, best.get(p.tier)),
        }
        for p, origin in known
    ]


def instance_detail(found: InstancePrices) -> dict[str, Any]:
    """One instance type's page: the summary line, the instance's facts, its accelerator's (GPU, Neuron) or
    its processor's (CPU), the sources, the prices, and the other sizes of its family (table rows)."""
    inst, spec = found.instance, found.accelerator
    tier = inst.accelerator_type.value
    on_demand = found.best.get(PriceTier.on_demand)
    family = catalog_rows(found.siblings, found.accelerators, found.family_prices)
    return {
        "name": inst.name,
        "tier": tier,
        "tier_label": TIER_LABEL[tier],
        "accelerator": accelerator_text(inst),
        "on_demand": on_demand,
        "on_demand_text": fmt_usd(on_demand.usd_per_hour) if on_demand else MISSING,
        "instance": instance_facts(inst),
        "accelerator_facts": accelerator_facts(inst, spec) if tier != "cpu" else None,
        "cpu_facts": cpu_facts(spec) if tier == "cpu" else None,
        "spec_name": spec.name,
        "sources": source_rows(inst, spec),
        "prices": price_rows(found.snapshot, found.stored, found.best),
        "region": TABLE_REGION,
        "family_name": inst.family,
        "family": [dict(r, current=r["name"] == inst.name) for r in family],
        "hours_per_month": HOURS_PER_MONTH,
        "estimate_href": "/estimate?" + urlencode({"instance_type": inst.name}),
    }


# ------------------------------------------------------------------------------------------- loaders
def catalog_context(
    store: Store, *, q: str | None, tier: str | None, sort: str | None, direction: str | None
) -> dict[str, Any]:
    """The Catalog page from the catalog and the store's on-demand prices (one query)."""
    table = catalog_table(store, TABLE_REGION)
    rows = catalog_rows(table.instances, table.accelerators, table.prices)
    return catalog_page_view(rows, q=q, tier=tier, sort=sort, direction=direction)


def detail_context(store: Store, name: str) -> dict[str, Any]:
    """One instance type's page (NotFoundError, with suggestions, for a name the catalog does not have)."""
    return instance_detail(instance_prices(store, name, TABLE_REGION, with_family=True))
