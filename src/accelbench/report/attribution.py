"""Who and where a stored run is, as people read it: the model it measured, the tokenizer the client counted
with, and where the engine ran ("this machine", an instance type, "remote endpoint (host:port)",
"imported (source)"). The pages, ``runs list``/``runs show`` and the report draw these labels from here.

A run made against an endpoint with ``--tokenizer DIR`` stored that directory as its model before this rule
(``cli/bench.py`` and ``bench/sweep.py`` now store the server's own name for it); ``model_label`` shows such an
old run by its served name too, and ``tokenizer_of`` gives the directory separately.
"""

from __future__ import annotations

from typing import Any

from accelbench.domain.results import RunInfo
from accelbench.report.formatting import MISSING

#: hosts that name this machine
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "::"})

#: what a run whose target is the local engine process (or a loopback endpoint) is called
THIS_MACHINE = "this machine"


def endpoint_address(base_url: str | None) -> tuple[str, bool] | None:
    """``("host:port", is_loopback)`` of a server URL (credentials never shown), None when there is none."""
    if not base_url:
        return None
    import httpx  # start-up time: `runs list` draws these labels and needs httpx only for a run with a URL

    try:
        url = httpx.URL(base_url if "://" in base_url else f"http://{base_url}")
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    host = url.host
    if not host:
        return None
    shown = f"[{host}]" if ":" in host else host
    port = url.port
    address = f"{shown}:{port}" if port else shown
    return address, host.lower() in LOOPBACK_HOSTS or host.startswith("127.")


def _endpoint_record(run: RunInfo) -> dict[str, Any]:
    spec = run.spec if isinstance(run.spec, dict) else {}
    record = spec.get("endpoint")
    return record if isinstance(record, dict) else {}


def tokenizer_of(run: RunInfo) -> str | None:
    """The local tokenizer directory the client counted tokens with (``--tokenizer DIR``), when one was given."""
    tokenizer = _endpoint_record(run).get("tokenizer")
    return str(tokenizer) if tokenizer else None


def model_label(run: RunInfo) -> str:
    """The model a run measured: its stored model, else the name the server answers to. An old run that stored
    its ``--tokenizer`` directory as the model is shown by its served name."""
    tokenizer = tokenizer_of(run)
    if tokenizer and run.model == tokenizer and run.served_model and run.served_model != tokenizer:
        return run.served_model
    return run.model or run.served_model or MISSING


def import_source(run: RunInfo) -> str:
    extra = run.extra if isinstance(run.extra, dict) else {}
    return str(extra.get("source") or "a results file")


def is_imported(run: RunInfo) -> bool:
    return run.kind == "import" or run.target == "import"


def where_label(run: RunInfo) -> str:
    """Where the engine ran: an imported run says from what; an instance type is named; the local target or a
    loopback endpoint is this machine; any other endpoint is "remote endpoint (host:port)"."""
    if is_imported(run):
        source = import_source(run)
        return f"imported ({source}) on {run.instance_type}" if run.instance_type else f"imported ({source})"
    if run.instance_type:
        return run.instance_type
    if run.target == "local":
        return THIS_MACHINE
    address = endpoint_address(run.base_url or _endpoint_record(run).get("base_url"))
    if address is None:
        return MISSING
    host, loopback = address
    return THIS_MACHINE if loopback else f"remote endpoint ({host})"


def ran_here(run: RunInfo) -> bool:
    """Whether the machine described by the run's captured ``cpu`` is the engine's: the local target or a
    loopback endpoint, or a run that records nowhere else (no instance type, no endpoint, not imported)."""
    return where_label(run) in (THIS_MACHINE, MISSING)
