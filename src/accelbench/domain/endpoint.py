"""What a benchmark sees of a deployment (Endpoint): where to send, the served model name, how to tokenize."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from accelbench.domain.strict import StrictModel
from accelbench.redact import MASK, is_secret_name, redact_url


class Endpoint(StrictModel):
    """What the benchmark sees of a deployment: where to send, which served model name, how to tokenize."""

    base_url: str = Field(description="Server root, e.g. http://127.0.0.1:8000 (no /v1).")
    served_model: str = Field(
        description="The model name the server answers to (the `model` field of requests)."
    )
    tokenizer: str | None = Field(
        default=None,
        description="Local tokenizer directory; None asks the server's /tokenize endpoint.",
    )
    api_key: str | None = Field(default=None, description="Bearer token for the server.", repr=False)
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra HTTP headers sent with every request."
    )
    engine_pids: list[int] = Field(
        default_factory=list,
        description="Process ids of an engine running on this machine (a local target): the benchmark samples "
        "this machine's devices and the CPU time and memory of these processes' cgroups. Empty otherwise.",
    )

    def request_headers(self) -> dict[str, str]:
        """The headers every request to the server carries: the extra ``headers`` and, with an API key, its
        bearer token."""
        auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return {**self.headers, **auth}

    def record(self) -> dict[str, Any]:
        """What a stored run keeps of the endpoint: no API key, secret headers and a URL's password as ***."""
        return {
            "base_url": redact_url(self.base_url),
            "served_model": self.served_model,
            "tokenizer": self.tokenizer,
            "headers": {k: (MASK if is_secret_name(k) else v) for k, v in self.headers.items()},
        }
