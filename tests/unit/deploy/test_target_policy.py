"""The target policy decides on the parsed URL and the resolved addresses, before any connection: every refusal
here is proved with a stub resolver (no packet is sent; a metadata address is never connected to), and the one
real server is on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from accelbench.deploy.endpoint import ExistingEndpointTarget
from accelbench.deploy.target_policy import (
    TargetPolicy,
    active_policy,
    check_spec_targets,
    enforce,
    service_policy,
)
from accelbench.domain.run import EndpointTarget, RunSpec
from accelbench.errors import UserInputError
from accelbench.settings import reset_settings_cache
from tests.support.stream_server import Script, StreamServer

NAMES = {
    "metadata.test": ["169.254.169.254"],
    "rebind.test": ["10.0.0.5", "169.254.169.254"],  # one bad answer among good ones is enough to refuse
    "v6meta.test": ["fd00:ec2::254"],
    "mapped.test": ["::ffff:169.254.169.254"],
    "engine.test": ["127.0.0.1"],
    "private.test": ["10.1.2.3"],
    "public.test": ["203.0.113.7"],
}


def stub(host: str, port: int) -> list[str]:
    if host not in NAMES:
        raise OSError(f"no such host {host}")
    return NAMES[host]


def never(host: str, port: int) -> list[str]:
    raise AssertionError(f"resolved {host}: a URL refused by its form must not be resolved")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("gopher://127.0.0.1:70/_x", "only http and https"),
        ("ftp://engine.test/", "only http and https"),
        ("http://usr:pw@engine.test:8000", "user name or password"),
        ("http://169.254.169.254/latest/meta-data?", "a query or a fragment"),
        ("http://engine.test:8000/v1?", "a query or a fragment"),
        ("http://engine.test:8000#/x", "a query or a fragment"),
        ("http://engine.test:8000/latest/meta-data", "carries a path"),
        ("http://engine.test:8000/v1/../admin", "carries a path"),
        ("http://engine.test:8000/%2e%2e/admin", "% escape"),
        ("http://engine.test:8000\\@169.254.169.254", "backslash"),
        ("http://", "names no host"),
        ("http://engine.test:99999", "not a URL"),
    ],
)
def test_form_refusals_need_no_resolution(url: str, says: str) -> None:
    with pytest.raises(UserInputError, match="refused") as err:
        TargetPolicy(resolver=never).check(url)
    assert says in err.value.message
    assert "pw" not in err.value.message  # the URL is named redacted


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://169.254.169.254", "cloud metadata"),
        ("http://169.254.10.1:8000", "link-local"),
        ("http://[fe80::1]:8000", "link-local"),
        ("http://[fd00:ec2::254]", "cloud metadata"),
        ("http://[::ffff:169.254.169.254]", "cloud metadata"),
        ("http://100.100.100.200", "cloud metadata"),
        ("http://0.0.0.0:8000", "unspecified"),
        ("http://metadata.test", "cloud metadata"),
        ("http://rebind.test:8000", "cloud metadata"),
        ("http://v6meta.test", "cloud metadata"),
        ("http://mapped.test", "cloud metadata"),
        ("http://nowhere.test:8000", "does not resolve"),
    ],
)
def test_refused_addresses_literal_or_resolved(url: str, says: str) -> None:
    with pytest.raises(UserInputError) as err:
        TargetPolicy(resolver=stub).check(url)
    assert says in err.value.message, err.value.message


def test_private_and_loopback_allowed_without_an_allow_list() -> None:
    policy = TargetPolicy(resolver=stub)
    for url in (
        "http://private.test:8000",
        "http://127.0.0.1:8000/v1",
        "https://public.test",
        "http://[::1]:9",
    ):
        assert policy.check(url).url.startswith(url.split("/v1")[0].rstrip("/"))


def test_the_allow_list_takes_hosts_and_cidrs() -> None:
    policy = TargetPolicy(allowed=["10.0.0.0/8", "public.test"], resolver=stub)
    assert policy.check("http://private.test:8000").address == "10.1.2.3"
    assert policy.check("https://public.test").address == "203.0.113.7"
    for url in ("http://127.0.0.1:8000", "http://engine.test:8000", "http://192.168.1.5"):
        with pytest.raises(UserInputError, match="ACCELBENCH_ALLOWED_TARGETS"):
            policy.check(url)


def test_the_allow_list_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBENCH_ALLOWED_TARGETS", "10.0.0.0/8, engine.internal")
    reset_settings_cache()
    assert list(service_policy().allowed) == ["10.0.0.0/8", "engine.internal"]
    reset_settings_cache()


def test_the_services_own_address_is_refused() -> None:
    own = TargetPolicy(own=[("127.0.0.1", 8000)], resolver=stub)
    with pytest.raises(UserInputError, match="own address"):
        own.check("http://engine.test:8000")
    with pytest.raises(UserInputError, match="own address"):
        own.check("http://127.0.0.1:8000")
    assert own.check("http://127.0.0.1:8001").port == 8001  # another port on loopback is another server
    anywhere = TargetPolicy(own=[("0.0.0.0", 8080)], resolver=stub, local_addresses=lambda: ["10.1.2.3"])
    for url in ("http://private.test:8080", "http://127.0.0.1:8080"):
        with pytest.raises(UserInputError, match="own address"):
            anywhere.check(url)


def test_an_http_target_is_pinned_to_its_checked_address_https_keeps_its_name() -> None:
    http = TargetPolicy(resolver=stub).check("http://engine.test:8000/v1/")
    assert http.pinned_url == "http://127.0.0.1:8000" and http.host_header == "engine.test:8000"
    https = TargetPolicy(resolver=stub).check("https://public.test")
    assert https.pinned_url == "https://public.test" and https.address == "203.0.113.7"


def test_a_spec_is_checked_on_every_server_it_names() -> None:
    bad = RunSpec.model_validate(
        {"model": "m", "target": {"kind": "endpoint", "base_url": "http://169.254.169.254"}}
    )
    with pytest.raises(UserInputError, match=r"target\.base_url"):
        check_spec_targets(bad, TargetPolicy(resolver=stub))
    ec2 = RunSpec.model_validate(
        {"model": "m", "instance_type": "c7i.large", "target": {"kind": "ec2", "endpoint_url": "gopher://x"}}
    )
    with pytest.raises(UserInputError, match=r"target\.endpoint_url"):
        check_spec_targets(ec2, TargetPolicy(resolver=stub))


@pytest.fixture
def enforced() -> Iterator[None]:
    enforce(TargetPolicy(resolver=stub))
    yield
    enforce(None)
    assert active_policy() is None


def test_the_service_reaches_a_named_server_at_its_checked_address(enforced: None) -> None:
    with StreamServer(Script(ttft_ms=1, itl_ms=1), model="m") as server:
        port = server.base_url.rsplit(":", 1)[1]
        # engine.test does not exist for the system resolver: the connection can only go to the pinned address
        target = ExistingEndpointTarget(EndpointTarget(base_url=f"http://engine.test:{port}/v1"))
        spec = RunSpec.model_validate({"model": "m", "target": target.config.model_dump()})
        endpoint = target.deploy(spec)
        target.wait_ready(timeout=5)
    assert endpoint.base_url == f"http://127.0.0.1:{port}"
    assert endpoint.headers["Host"] == f"engine.test:{port}" and endpoint.served_model == "m"


def test_the_service_refuses_a_metadata_target_before_connecting(enforced: None) -> None:
    target = ExistingEndpointTarget(EndpointTarget(base_url="http://metadata.test"))
    with pytest.raises(UserInputError, match="cloud metadata"):
        target.wait_ready(timeout=1)


def test_a_name_server_that_does_not_answer_in_time_refuses_the_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    from accelbench.deploy import target_policy

    release = threading.Event()

    def slow(*args: object, **kw: object) -> list[object]:
        release.wait(5)
        return []

    monkeypatch.setattr(target_policy.socket, "getaddrinfo", slow)
    monkeypatch.setattr(target_policy, "RESOLVE_TIMEOUT_S", 0.1)
    try:
        with pytest.raises(UserInputError, match="does not resolve"):
            TargetPolicy().check("http://slow.test:8000")
    finally:
        release.set()
