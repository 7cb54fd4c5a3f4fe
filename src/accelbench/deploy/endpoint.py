"""The ``endpoint`` target: a server that is already running. Nothing is deployed and nothing torn down.

The served model name is the spec's ``target.served_model`` when given; otherwise the spec's model when the
server lists it in ``/v1/models``; otherwise the only model the server lists. A tokenizer comes from the
target, else from a prepared model of the same name (when there is one), else the server's ``/tokenize``.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from accelbench.deploy.model_index import resolve_model
from accelbench.deploy.target import TARGETS, DeployedEngine, Target
from accelbench.deploy.target_policy import active_policy
from accelbench.domain.answers import ModelsAnswer, parse_answer
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.progress import Progress
from accelbench.domain.run import EndpointTarget, RunSpec
from accelbench.errors import AccelbenchError, EngineError, UserInputError
from accelbench.redact import redact_url

LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


@TARGETS.register("endpoint")
class ExistingEndpointTarget(Target):
    """A server someone else runs (another machine, a cloud endpoint, a server started by hand)."""

    kind = "endpoint"

    def __init__(self, config: EndpointTarget, *, progress: Progress | None = None, **context: Any) -> None:
        super().__init__(config, progress=progress, **context)
        self.config: EndpointTarget = config
        self.base_url = config.base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        # a server on this machine is described by this machine's environment; another one is not
        self.engine_on_this_host = urlsplit(self.base_url).hostname in LOOPBACK
        self._tokenizer: str | None = config.tokenizer
        self._headers: dict[str, str] = {}
        self._pinned = False

    def _pin(self) -> None:
        """In the service, the target policy checks the server before the first connection and pins the checked
        address (an http server is reached at its checked IP, with its Host header kept)."""
        policy = active_policy()
        if policy is None or self._pinned:
            return
        checked = policy.check(self.config.base_url, "target.base_url")
        self.base_url = checked.pinned_url
        self._headers = {"Host": checked.host_header} if checked.pinned_url != checked.url else {}
        self._pinned = True

    def _models(self, client: httpx.Client) -> list[str]:
        try:
            resp = client.get(self.base_url + "/v1/models")
            return [m.id for m in parse_answer(ModelsAnswer, resp.content, self.base_url + "/v1/models").data]
        except (httpx.HTTPError, UserInputError):
            return []  # a server that does not list its models serves the spec's model name

    def deploy(self, spec: RunSpec, *, run_dir: Path | None = None) -> Endpoint:
        self._pin()
        served = self.config.served_model
        if served is None:
            with httpx.Client(timeout=10, headers=self._headers) as client:
                ids = self._models(client)
            if spec.model in ids:
                served = spec.model
            elif len(ids) == 1:
                served = ids[0]
            elif ids:
                raise UserInputError(
                    f"The server at {redact_url(self.base_url)} serves {ids}; which one is {spec.model!r}?",
                    hint="Set target.served_model in the spec.",
                )
            else:
                served = spec.model
        if self._tokenizer is None:
            with contextlib.suppress(AccelbenchError):
                self._tokenizer = resolve_model(spec.model).tokenizer
        self.deployed = DeployedEngine(
            target=self.kind,
            runtime=spec.engine.name,
            engine_version=spec.engine.version,
            model=spec.model,
            model_revision=spec.revision,
            served_model=served,
            base_url=self.base_url,
        )
        return self.endpoint

    @property
    def endpoint(self) -> Endpoint:
        endpoint = super().endpoint
        headers = {**endpoint.headers, **self._headers}
        return endpoint.model_copy(update={"tokenizer": self._tokenizer, "headers": headers})

    def wait_ready(self, timeout: float | None = None) -> None:
        """Poll until the server answers; a cancel stops the wait at once (``DeployCancelled``): each probe
        connects for at most a second and the run's cancel is checked between probes and pauses."""
        timeout = 60.0 if timeout is None else timeout
        deadline = time.monotonic() + timeout
        last = "no answer"
        self._pin()
        with httpx.Client(timeout=httpx.Timeout(5.0, connect=1.0), headers=self._headers) as client:
            while True:
                for path in ("/health", "/v1/models"):
                    self._check_cancel()
                    try:
                        resp = client.get(self.base_url + path)
                        if resp.status_code == 200:
                            return
                        last = f"{path}: HTTP {resp.status_code // 100}xx"  # a status class, never more
                    except httpx.HTTPError as exc:
                        last = f"{path}: {type(exc).__name__}"
                if time.monotonic() > deadline:
                    raise EngineError(
                        f"The server at {redact_url(self.base_url)} is not ready after {timeout:.0f} s ({last}).",
                        hint="Check that it is running and reachable from here, and the URL (no /v1).",
                    )
                self._sleep(1.0)

    def logs(self, tail: int | None = 200) -> str:
        return ""  # not our process: its logs are wherever its owner keeps them

    def teardown(self) -> None:
        """Nothing to do: this target never started anything."""
