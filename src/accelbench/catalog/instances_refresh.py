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
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3  # heavy: this module is imported only by `catalog refresh-instances` (services/catalog_views.py)
import yaml
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
)
from botocore.parsers import ResponseParserError

from accelbench.catalog.instance_mapping import (
    Provenance,
    Skipped,
    changes_between,
    map_instance_type,
)
from accelbench.catalog.loader import (
    SCHEMA_VERSION,
    get_catalog,
    load_catalog,
    parse_instances,
    refreshed_instances_file,
    reset_catalog_cache,
)
from accelbench.domain.instance_types import InstanceType
from accelbench.errors import UserInputError
from accelbench.redact import redact_url
from accelbench.settings import get_settings

DEFAULT_REGION = "us-east-1"
NON_AWS_PROVIDER = "ec2-compatible"
MAX_NAMES_PER_CALL = 100  # DescribeInstanceTypes takes at most 100 names per request
_REGION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_PROVIDER_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_NAME_RE = re.compile(r"^[a-z0-9*?][a-z0-9*?-]*\.[a-z0-9*?][a-z0-9*?-]*$")


class EndpointError(UserInputError):
    """The EC2 endpoint could not be used: no credentials, unreachable, or it refused the call (exit 1: not the
    input's fault)."""

    status_code = 503
    exit_code = 1


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


# --------------------------------------------------------------------------------------------- the API call
def ec2_client(endpoint_url: str, region: str) -> Any:
    """A boto3 EC2 client at ``endpoint_url`` with credentials from the usual boto3 chain (environment,
    profile, container or instance role), quick to give up. NoCredentialsError up front when there are none."""

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
        import fcntl  # POSIX-only: the cache lock is taken only when refreshing
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
        return boto3.session.Session().region_name
    except Exception:
        return None
