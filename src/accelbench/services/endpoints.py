"""The server a measure command points at (``bench``, ``sweep``, ``capacity``, ``fleet``): its URL checked
before anything connects, the model it serves asked at /v1/models, and where the engine ran (this machine's
hardware for a loopback URL, else the remote environment probed over HTTP)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field

from accelbench.bench.runner import engine_is_local
from accelbench.deploy.target_policy import check_url_form
from accelbench.domain.answers import ModelsAnswer, parse_answer
from accelbench.domain.endpoint import Endpoint
from accelbench.errors import ServerUnreachable, UserInputError
from accelbench.redact import redact_url
from accelbench.telemetry.host import capture_environment, remote_environment

__all__ = [
    "ServerTarget",
    "check_base_url",
    "endpoint_environment",
    "first_served_model",
    "served_model_root",
    "served_models",
]


def check_base_url(value: str) -> str:
    """``value`` when it is a server root a benchmark may send to; else a UserInputError saying why."""
    check_url_form(value)
    return value


def served_models(base_url: str, headers: dict[str, str], api_key: str | None) -> list[dict[str, Any]]:
    """What the server lists at /v1/models (id, and for vLLM the model's ``root``: where it was loaded from)."""
    hdrs = dict(headers)
    if api_key:
        hdrs["Authorization"] = f"Bearer {api_key}"
    url = base_url.rstrip("/").removesuffix("/v1") + "/v1/models"
    try:
        r = httpx.get(url, headers=hdrs, timeout=30)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise ServerUnreachable.at(redact_url(base_url), exc) from None
    except httpx.HTTPError as exc:
        raise UserInputError(
            f"Cannot ask {redact_url(url)} for the served model ({type(exc).__name__}).",
            hint="Give --model NAME.",
        ) from None
    if r.status_code != 200:
        raise UserInputError(f"{redact_url(url)} answered HTTP {r.status_code}.", hint="Give --model NAME.")
    answer = parse_answer(ModelsAnswer, r.content, url)
    return [m.model_dump() for m in answer.data]


def first_served_model(base_url: str, headers: dict[str, str], api_key: str | None) -> str:
    """The first model the server lists at /v1/models (what vLLM's client does without --model)."""
    return str(served_models(base_url, headers, api_key)[0]["id"])


def served_model_root(base_url: str, headers: dict[str, str], api_key: str | None, served: str) -> str | None:
    """The directory the server loaded ``served`` from, when it says (vLLM's ``root``) and it exists here: what
    the planner reads the architecture from when the served name is an alias."""
    try:
        listed = served_models(base_url, headers, api_key)
    except UserInputError:
        return None
    for d in listed:
        root = d.get("root")
        if d["id"] == served and isinstance(root, str) and Path(root).is_dir():
            return root
    return None


def endpoint_environment(
    endpoint: Endpoint, command: list[str] | None, *, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """Where a bench or sweep against ``endpoint`` happened: this machine's hardware when the engine runs here
    (a loopback URL), else the remote environment (the engine probed over HTTP, this machine only as the load
    generator), so a remote server's run never carries this machine's CPU as the engine's."""
    if engine_is_local(endpoint):
        return capture_environment(endpoint.base_url, command=command, headers=headers)
    if command is None:
        command = [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv and sys.argv[0] else []
    return remote_environment(endpoint.base_url, command, headers=headers)


class ServerTarget(BaseModel):
    """The server a command measures, as given: the served model None asks /v1/models for the first one."""

    base_url: str
    served_model: str | None = None
    tokenizer: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    headers: dict[str, str] = Field(default_factory=dict)

    def endpoint(self) -> Endpoint:
        served = self.served_model or first_served_model(self.base_url, self.headers, self.api_key)
        return Endpoint(
            base_url=self.base_url,
            served_model=served,
            tokenizer=self.tokenizer,
            api_key=self.api_key,
            headers=self.headers,
        )
