"""The target policy: which servers the service (``accelbench serve``: the API, the pages, the run worker) will
connect to when a caller names one (an endpoint target's ``base_url``, an EC2-compatible ``endpoint_url``).

- http and https only; no user name or password, query, fragment or path in a base URL (a trailing ``?`` would
  let the caller choose the path the worker requests), except a trailing ``/v1``;
- the host is resolved first and every address it resolves to is checked: link-local addresses
  (169.254.0.0/16, fe80::/10), cloud metadata addresses (169.254.169.254, fd00:ec2::254, 100.100.100.200,
  192.0.0.192), unspecified, broadcast and multicast addresses, and the service's own listening address are
  refused; an IPv4 address written as IPv6 (``::ffff:169.254.169.254``) is checked as IPv4;
- private and loopback addresses are allowed (benchmarking an in-cluster engine is the point) unless the operator
  sets ``ACCELBENCH_ALLOWED_TARGETS`` (host names or CIDRs): then only those are;
- the checked address is pinned for the connection: an http target is reached at the checked IP with its
  ``Host`` header kept, so a second DNS answer cannot swap the server; an https target keeps its name, and its
  certificate must match that name, which a swapped server cannot show.

The CLI does not apply the policy: it is a person on their own machine, who may benchmark any server they can
reach. Refusals are decided on the parsed URL and the resolved addresses, before any connection is made.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import psutil

from accelbench.domain.run import Ec2Target, EndpointTarget, RunSpec
from accelbench.errors import UserInputError
from accelbench.redact import redact_url
from accelbench.settings import get_settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[str]]

METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "192.0.0.192")
)
_REFUSED_NETS: tuple[tuple[IPNetwork, str], ...] = tuple(
    (ipaddress.ip_network(net), why)
    for net, why in (
        ("169.254.0.0/16", "a link-local address"),
        ("fe80::/10", "a link-local address"),
        ("0.0.0.0/8", "an unspecified address"),
        ("::/128", "an unspecified address"),
        ("255.255.255.255/32", "the broadcast address"),
        ("224.0.0.0/4", "a multicast address"),
        ("ff00::/8", "a multicast address"),
    )
)
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f\\%]")
_POLICY_HINT = "Name an engine's server as http(s)://host:port (optionally ending in /v1)."


RESOLVE_TIMEOUT_S = 5.0
_RESOLVERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="resolve")


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (the system resolver), within ``RESOLVE_TIMEOUT_S``: a request is
    never held by a slow name server (a name that does not resolve in time is refused)."""
    future = _RESOLVERS.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        infos = future.result(timeout=RESOLVE_TIMEOUT_S)
    except FuturesTimeout:
        raise OSError(f"{host} did not resolve within {RESOLVE_TIMEOUT_S:g} s") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _ip(text: str) -> IPAddress:
    ip = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@dataclass(frozen=True)
class CheckedTarget:
    """A base URL that passed the policy, and the address it was checked at."""

    url: str  # as given, without a trailing / or /v1
    scheme: str
    host: str
    port: int
    address: str

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def pinned_url(self) -> str:
        """Where to connect: the checked IP for http (send ``host_header`` as Host), the name for https."""
        if self.scheme == "https":
            return self.url
        ip = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{ip}:{self.port}"


@dataclass
class TargetPolicy:
    """The rule, with what it depends on: the operator's allow-list, the service's own listening addresses and
    a resolver (tests pass a stub, so a refusal is proved without a packet)."""

    allowed: Sequence[str] = ()
    own: Sequence[tuple[str, int]] = ()
    resolver: Resolver = system_resolver
    local_addresses: Callable[[], Iterable[str]] = field(default=lambda: _local_addresses())

    def check(self, url: str, what: str = "target.base_url") -> CheckedTarget:
        """``url`` checked and resolved, or a UserInputError saying why it is refused and what to change."""
        scheme, host, port, base = self._parse(url, what)
        try:
            addresses = [_ip(a) for a in ([host] if _is_ip(host) else self.resolver(host, port))]
        except (OSError, ValueError, UnicodeError):
            addresses = []
        if not addresses:
            raise self._refuse(what, url, f"its host {host!r} does not resolve")
        for ip in addresses:
            why = self._refused(ip, port) or self._not_allowed(host, ip)
            if why:
                raise self._refuse(what, url, f"{host} is {ip}, {why}")
        return CheckedTarget(url=base, scheme=scheme, host=host, port=port, address=str(addresses[0]))

    def _parse(self, url: str, what: str) -> tuple[str, str, int, str]:
        if _BAD_CHARS.search(url):
            raise self._refuse(what, url, "it holds a space, a control character, a backslash or a % escape")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise self._refuse(what, url, "it is not a URL") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise self._refuse(what, url, f"only http and https are allowed, not {scheme or 'no scheme'!r}")
        if "@" in parts.netloc:
            raise self._refuse(what, url, "it carries a user name or password")
        if "?" in url or "#" in url:
            raise self._refuse(what, url, "it carries a query or a fragment")
        path = parts.path.rstrip("/")
        if path not in ("", "/v1"):
            raise self._refuse(what, url, f"it carries a path ({parts.path!r}); only /v1 may end a base URL")
        host = (parts.hostname or "").lower()
        if not host:
            raise self._refuse(what, url, "it names no host")
        port = port or (443 if scheme == "https" else 80)
        base = f"{scheme}://{parts.netloc}"
        return scheme, host, port, base

    def _refused(self, ip: IPAddress, port: int) -> str | None:
        if ip in METADATA:
            return "a cloud metadata address"
        for net, why in _REFUSED_NETS:
            if ip.version == net.version and ip in net:
                return why
        for own_host, own_port in self.own:
            if own_port != port:
                continue
            own_ip = _ip(own_host) if _is_ip(own_host) else None
            if own_host.lower() == "localhost":
                own_ip = ipaddress.ip_address("127.0.0.1")
            if own_ip is not None and own_ip.is_unspecified:
                if ip.is_loopback or str(ip) in set(self.local_addresses()):
                    return "this service's own address"
            elif ip == own_ip or (ip.is_loopback and own_ip is not None and own_ip.is_loopback):
                return "this service's own address"
        return None

    def _not_allowed(self, host: str, ip: IPAddress) -> str | None:
        if not self.allowed:
            return None
        for entry in self.allowed:
            entry = entry.strip().lower()
            try:
                net = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                if host == entry.rstrip("."):
                    return None
                continue
            if ip.version == net.version and ip in net:
                return None
        return "not in ACCELBENCH_ALLOWED_TARGETS (" + ", ".join(self.allowed) + ")"

    @staticmethod
    def _refuse(what: str, url: str, why: str) -> UserInputError:
        return UserInputError(
            f"{what} {redact_url(url)!r} is refused: {why}.",
            hint=f"{_POLICY_HINT} The service refuses link-local, metadata and its own addresses, and reaches "
            "only the hosts ACCELBENCH_ALLOWED_TARGETS lists when it is set.",
        )


def check_url_form(url: str, what: str = "--base-url") -> None:
    """The part of the rule the CLI applies too: an http or https URL with a host and a valid port (a user's
    own URL may carry a password or a path; it is never refused for its address)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise UserInputError(f"{what} {redact_url(url)!r} is not a URL ({exc}).", hint=_POLICY_HINT) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise UserInputError(
            f"{what} {redact_url(url)!r} is not an http(s) URL with a host.", hint=_POLICY_HINT
        )


def check_spec_targets(spec: RunSpec, policy: TargetPolicy) -> None:
    """Every server a remote caller's run spec names, checked before the run is stored."""
    if isinstance(spec.target, EndpointTarget):
        policy.check(spec.target.base_url, "target.base_url")
    elif isinstance(spec.target, Ec2Target) and spec.target.endpoint_url:
        policy.check(spec.target.endpoint_url, "target.endpoint_url")


def _is_ip(host: str) -> bool:
    try:
        _ip(host)
    except ValueError:
        return False
    return True


def _local_addresses() -> list[str]:

    return [a.address.split("%", 1)[0] for addrs in psutil.net_if_addrs().values() for a in addrs]


# ------------------------------------------------------------------------------------------- the service's own
_listening: list[tuple[str, int]] = []
_active: list[TargetPolicy] = []


def note_listening(host: str, port: int) -> None:
    """The service's own address (``accelbench serve --host --port``): never a target."""
    _listening.append((host, port))


def service_policy() -> TargetPolicy:
    """The policy the service applies, from the settings and its own listening addresses."""

    return TargetPolicy(allowed=list(get_settings().allowed_targets), own=list(_listening))


def enforce(policy: TargetPolicy | None) -> None:
    """Make ``policy`` the one this process's endpoint targets apply (the service, while it runs); None stops
    it (the service has stopped)."""
    _active.clear()
    if policy is not None:
        _active.append(policy)


def active_policy() -> TargetPolicy | None:
    """The policy this process enforces on endpoint targets: the service's, else None (the CLI)."""
    return _active[0] if _active else None
