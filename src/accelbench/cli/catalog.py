"""CLI commands: ``accelbench catalog list|show|refresh-prices|refresh-instances``.

``list`` filters the instance catalog (accelerator tier, family, serving memory, hourly price, architecture);
``show`` prints one instance type with its accelerator (or CPU) spec, the spec's sources and every known
price; ``refresh-prices`` fetches current prices from the AWS Pricing API into the store. Prices shown are
the best known: a refreshed price from the store when it is at least as new as the shipped snapshot.
``refresh-instances`` reads instance types (vCPUs, cores, threads per core, memory, devices) from an
EC2-compatible endpoint into the catalog overlay (``catalog/instances_refresh.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from rich.table import Table

from accelbench.cli.common import FormatOption, OutputFormat, console, err_console, print_json, user_errors
from accelbench.cli.render import Col, print_records, print_table
from accelbench.domain.instance_types import AcceleratorSpec, AcceleratorType, InstanceType, Price, PriceTier
from accelbench.errors import AccelbenchError
from accelbench.redact import redact_url
from accelbench.services import catalog_views as views
from accelbench.services.catalog_views import SNAPSHOT_REGION, InstanceView
from accelbench.services.session import get_store

catalog_app = typer.Typer(help="Instance types, accelerator specs and prices.", no_args_is_help=True)
RegionOption = typer.Option(SNAPSHOT_REGION, "--region", help="Region whose prices to show.")


def _store_or_none(quiet: bool = False) -> Any:
    """The results store for refreshed prices; None (snapshot only) when it cannot be opened."""
    try:
        return get_store()
    except AccelbenchError as exc:
        if not quiet:
            err_console.print(
                f"[yellow]Warning:[/] store unavailable ({exc.message}); using snapshot prices."
            )
    except Exception as exc:  # a broken database URL must not hide the shipped catalog
        if not quiet:
            err_console.print(f"[yellow]Warning:[/] store unavailable ({exc}); using snapshot prices.")
    return None


def _fmt_num(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value % 1 else f"{value:.0f}"


def _accel_text(inst: InstanceType) -> str:
    if inst.accelerator_type == AcceleratorType.cpu:
        return inst.accelerator_name
    return f"{inst.accelerator_count} x {inst.accelerator_name} ({_fmt_num(inst.accelerator_memory_gib)} GiB)"


# name and price matter most; the memory the engine may use, then the accelerator next
_LIST_COLUMNS: tuple[tuple[Col, Callable[[InstanceView], str]], ...] = (
    (Col("name", 0, whole=True), lambda r: r.instance.name),
    (Col("tier", 3), lambda r: r.instance.accelerator_type.value),
    (Col("accelerator", 2), lambda r: _accel_text(r.instance)),
    (Col("vCPU", 2, num=True), lambda r: str(r.instance.vcpus)),
    (Col("cores", 4, num=True), lambda r: str(r.instance.cores)),
    (Col("memory GiB", 3, num=True), lambda r: _fmt_num(r.instance.memory_gib)),
    (Col("serving GiB", 1, num=True), lambda r: _fmt_num(r.serving_memory_gib)),
    (Col("NUMA", 4, num=True), lambda r: str(r.instance.numa_nodes)),
    (Col("arch", 4), lambda r: r.instance.arch),
    (Col("USD/h", 0, num=True), lambda r: _fmt_num(r.price.usd_per_hour) if r.price else "-"),
)


@catalog_app.command("list")
def list_instances(
    accelerator: AcceleratorType | None = typer.Option(
        None, "--accelerator", "-a", help="Only this tier: gpu, neuron or cpu."
    ),
    family: list[str] | None = typer.Option(
        None, "--family", help="Only these instance families, e.g. g6 or r8g (repeatable)."
    ),
    min_memory: float | None = typer.Option(
        None,
        "--min-memory",
        min=0,
        help="Minimum serving memory in GiB (accelerator memory; host memory on CPU instances).",
    ),
    max_price: float | None = typer.Option(
        None,
        "--max-price",
        min=0,
        help="Maximum on-demand price in USD per hour (rows without a price drop).",
    ),
    arch: str | None = typer.Option(None, "--arch", help="x86_64 or arm64."),
    region: str = RegionOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """List instance types, filtered."""
    with user_errors():
        query = views.InstanceQuery(
            accelerator=accelerator,
            family=family or None,
            min_memory_gib=min_memory,
            max_price=max_price,
            arch=arch,
            region=region,
        )
        rows = views.list_instances(_store_or_none(quiet=fmt == OutputFormat.json), query)
        if fmt == OutputFormat.json:
            print_json([r.as_json() for r in rows])
            return
        print_records(_LIST_COLUMNS, rows, title=f"{len(rows)} instance types", formats="json")
        if not rows:
            err_console.print("No instance type matches these filters.")


def _topology_text(inst: InstanceType) -> str:
    if inst.physical_cores is None and inst.threads_per_core is None:
        return f"{inst.cores} (assumed: {'2 threads' if inst.cores != inst.vcpus else '1 thread'} per core)"
    tpc = inst.threads_per_core or inst.vcpus // inst.cores
    return f"{inst.cores} x {tpc} thread{'s' if tpc != 1 else ''}"


def _spec_rows(spec: AcceleratorSpec) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = [("kind", spec.kind.value), ("vendor", spec.vendor or "-")]
    if spec.kind == AcceleratorType.cpu:
        rows += [
            ("cores per socket", str(spec.cores_per_socket)),
            ("ISA", ", ".join(spec.isa)),
            ("memory channels", str(spec.memory_channels)),
            ("socket bandwidth GB/s", _fmt_num(spec.memory_bandwidth_gbps)),
            ("per-core bandwidth GB/s", _fmt_num(spec.per_core_bandwidth_gbps)),
            ("per-core BF16 GFLOP/s", _fmt_num(spec.per_core_bf16_gflops)),
            ("socket BF16 TFLOP/s", _fmt_num(spec.bf16_tflops)),
        ]
    else:
        rows += [
            ("memory GiB", _fmt_num(spec.memory_gib)),
            ("bandwidth GB/s", _fmt_num(spec.memory_bandwidth_gbps)),
            ("BF16 TFLOP/s (dense)", _fmt_num(spec.bf16_tflops)),
            ("FP8 TFLOP/s (dense)", _fmt_num(spec.fp8_tflops)),
            ("INT8 TOP/s (dense)", _fmt_num(spec.int8_tops)),
            ("interconnect GB/s", _fmt_num(spec.interconnect_gbps)),
            ("PCIe generation", _fmt_num(spec.pcie_gen)),
            ("FP8 KV cache", "yes" if spec.supports_fp8_kv else "no"),
        ]
        if spec.neuron_cores:
            rows.append(("NeuronCores", str(spec.neuron_cores)))
        if spec.neuron_logical_cores:
            rows.append(("logical NeuronCores", str(spec.neuron_logical_cores)))
    return rows


@catalog_app.command("show")
def show_instance(
    name: str = typer.Argument(..., help="Instance type, e.g. g6.2xlarge."),
    region: str = RegionOption,
    fmt: OutputFormat = FormatOption,
) -> None:
    """Show one instance type with its accelerator spec, sources and prices."""
    with user_errors():
        store = _store_or_none(quiet=fmt == OutputFormat.json)
        detail = views.instance_detail(store, name, region)
        if fmt == OutputFormat.json:
            print_json(
                {
                    "instance": detail.view.as_json(),
                    "accelerator": detail.spec.model_dump(mode="json"),
                    "prices": {t.value: p.model_dump(mode="json") for t, p in detail.prices.items()},
                }
            )
            return
        _render_show(detail.view, detail.spec, detail.prices, region)


def _render_show(
    row: InstanceView, spec: AcceleratorSpec, prices: dict[PriceTier, Price], region: str
) -> None:
    inst = row.instance
    t = Table(title=inst.name, show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    t.add_row("family", inst.family)
    t.add_row("tier", inst.accelerator_type.value)
    t.add_row("accelerator", _accel_text(inst))
    t.add_row("vCPU", str(inst.vcpus))
    t.add_row("physical cores", _topology_text(inst))
    t.add_row("memory GiB", _fmt_num(inst.memory_gib))
    t.add_row("serving memory GiB", _fmt_num(row.serving_memory_gib))
    t.add_row("architecture", inst.arch)
    t.add_row("NUMA nodes", str(inst.numa_nodes))
    t.add_row("network Gbps", _fmt_num(inst.network_gbps))
    if inst.cpu_generation:
        t.add_row("CPU generation", inst.cpu_generation)
        t.add_row("CPU ISA", ", ".join(inst.cpu_isa))
    t.add_row("provider", inst.provider)
    if inst.refreshed_from:
        t.add_row(
            "refreshed from",
            f"{inst.refreshed_from} ({inst.refreshed_region or '?'}, {inst.refreshed_date or '?'})",
        )
    console.print(t)
    s = Table(title=f"{spec.name} spec", show_header=False)
    s.add_column("field", style="bold")
    s.add_column("value", overflow="fold")
    for k, v in _spec_rows(spec):
        s.add_row(k, v)
    console.print(s)
    for src in spec.sources:
        console.print(
            f"  source: {src.title} {src.url or ''} (accessed {src.accessed or '?'})", highlight=False
        )
    price_rows = []
    for tier in PriceTier:
        price = prices.get(tier)
        if price is None:
            price_rows.append([tier.value, "-", "-", "unknown (run `accelbench catalog refresh-prices`)"])
        else:
            price_rows.append(
                [tier.value, _fmt_num(price.usd_per_hour, 6), price.effective_date, price.source]
            )
    print_table(
        [Col("tier", 0), Col("USD/h", 0, num=True), Col("date", 0, whole=True), Col("source", 0)],
        price_rows,
        title=f"prices in {region}",
        formats="json",
    )


@catalog_app.command("refresh-prices")
def refresh_prices_cmd(
    region: list[str] | None = typer.Option(
        None, "--region", help="Region to price (repeatable). Default: us-east-1."
    ),
    instance: list[str] | None = typer.Option(
        None, "--instance", "-i", help="Only these instance types (repeatable). Default: the whole catalog."
    ),
    family: list[str] | None = typer.Option(None, "--family", help="Only these families (repeatable)."),
    delay: float = typer.Option(0.2, "--delay", min=0, help="Seconds between API calls (avoids throttling)."),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Fetch on-demand and reserved (1 yr / 3 yr all upfront, as hourly) prices from the AWS Pricing API
    into the store. Needs AWS credentials with pricing:GetProducts; without them the snapshot stays in use."""
    with user_errors():
        request = views.PriceRefresh(
            regions=region or [SNAPSHOT_REGION],
            instances=instance or [],
            families=family or [],
            delay_s=delay,
        )
        names = request.instance_names()
        store = get_store()
        regions = request.checked_regions()
        reports = []
        for reg in regions:
            with err_console.status(f"Pricing {reg} ...") as status:

                def progress(name: str, i: int, n: int, _reg: str = reg, _st: Any = status) -> None:
                    if name:
                        _st.update(f"Pricing {_reg}: {name} ({i + 1}/{n})")

                rep = views.refresh_region_prices(store, request, reg, names, progress)
            reports.append(rep)
            err_console.print(
                f"{reg}: {rep.written} prices for {len({p.instance_type for p in rep.prices})} instance types"
                + (f"; no product for {', '.join(rep.missing)}" if rep.missing else ""),
                highlight=False,
            )
        if fmt == OutputFormat.json:
            print_json([r.as_dict() for r in reports])
            return
        refreshed = []
        for rep in reports:
            by: dict[str, dict[PriceTier, float]] = {}
            for pr in rep.prices:
                by.setdefault(pr.instance_type, {})[pr.tier] = pr.usd_per_hour
            for name, tiers in by.items():
                refreshed.append([rep.region, name, *(_fmt_num(tiers.get(t), 6) for t in PriceTier)])
        print_table(
            [Col("region", 1), Col("instance", 0, whole=True)]
            + [
                Col(c, 0 if c == "on_demand" else 1, num=True)
                for c in ("on_demand", "reserved_1yr", "reserved_3yr")
            ],
            refreshed,
            title="refreshed prices (USD/h)",
            formats="json",
        )


_SKIPPED_SHOWN = 40


@catalog_app.command("refresh-instances")
def refresh_instances_cmd(
    endpoint_url: str = typer.Option(
        ...,
        "--endpoint-url",
        help="EC2 API endpoint: AWS's (https://ec2.REGION.amazonaws.com) or an EC2-compatible cloud's.",
    ),
    region: str | None = typer.Option(
        None, "--region", help="Region to ask. Default: the AWS configuration's region, else us-east-1."
    ),
    instance_types: list[str] | None = typer.Option(
        None,
        "--instance-types",
        "-i",
        help="Only these types, comma-separated (repeatable; EC2 wildcards work: 'm8i.*'). "
        "Default: every type the endpoint lists.",
    ),
    provider_name: str | None = typer.Option(
        None,
        "--provider-name",
        help="Provider recorded on the rows. Default: aws for an AWS endpoint, else ec2-compatible.",
    ),
    fmt: OutputFormat = FormatOption,
) -> None:
    """Read instance types (vCPUs, physical cores, threads per core, memory, GPUs, Neuron devices, network)
    from an EC2-compatible endpoint's DescribeInstanceTypes into the catalog overlay, which the planner, the
    CLI and the API then use. Types with no catalog family or accelerator spec are skipped with the reason.
    Needs credentials from the usual AWS chain with ec2:DescribeInstanceTypes."""
    with user_errors():
        with err_console.status(f"Reading instance types from {redact_url(endpoint_url)} ..."):
            rep = views.refresh_instance_types(endpoint_url, region, instance_types, provider_name)
        counts = rep.as_dict()["counts"]
        err_console.print(
            f"{rep.endpoint} ({rep.provider}, {rep.region}): {counts['added']} added, {counts['updated']} "
            f"updated, {counts['unchanged']} unchanged, {counts['skipped']} skipped"
            + (f"; written to {rep.path}" if rep.rows else "; nothing written"),
            highlight=False,
        )
        if fmt == OutputFormat.json:
            print_json(rep.as_dict())
            return
        cols = [
            Col("status", 0),
            Col("instance", 0, whole=True),
            Col("accelerator", 2),
            Col("vCPU", 1, num=True),
            Col("cores x threads", 3),
            Col("memory GiB", 1, num=True),
            Col("NUMA", 3, num=True),
            Col("changes", 0),
        ]
        found = []
        for row in rep.rows:
            if row.status == "unchanged":
                continue
            i = row.instance
            note = "; ".join(row.changes) or "-"
            if row.shadowed_by_user_file:
                note += " (a hand-written catalog row of this name takes precedence)"
            found.append(
                [
                    row.status,
                    i.name,
                    _accel_text(i),
                    str(i.vcpus),
                    _topology_text(i),
                    _fmt_num(i.memory_gib),
                    str(i.numa_nodes),
                    note,
                ]
            )
        for sk in rep.skipped[:_SKIPPED_SHOWN]:
            found.append(["skipped", sk.name, "-", "-", "-", "-", "-", sk.reason])
        print_table(cols, found, title=f"instance types from {rep.endpoint}", formats="json")
        if len(rep.skipped) > _SKIPPED_SHOWN:
            err_console.print(
                f"... and {len(rep.skipped) - _SKIPPED_SHOWN} more skipped (--format json lists them all).",
                highlight=False,
            )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(catalog_app, name="catalog")
