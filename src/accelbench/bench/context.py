"""The context a server advertises, checked before any load is sent.

vLLM lists each served model at ``/v1/models`` with its ``max_model_len``; a request whose prompt and output
exceed it is refused by the server (HTTP 400), so a sweep cell of such requests would only measure failures.
Servers that advertise no length (llama.cpp's, most proxies) are not checked here.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpx

from accelbench.bench.runner import server_root
from accelbench.domain.endpoint import Endpoint
from accelbench.errors import UserInputError


def served_context(endpoint: Endpoint, timeout: float = 10.0) -> int | None:
    """``max_model_len`` of the served model at ``/v1/models`` (the first model if the name is not listed);
    None when the server does not say, or cannot be asked."""
    headers = endpoint.request_headers()
    url = server_root(endpoint.base_url) + "/v1/models"
    try:
        resp = httpx.get(url, headers=headers, timeout=timeout)
        models = resp.json().get("data") if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if not isinstance(models, list) or not models:
        return None
    entry = next(
        (m for m in models if isinstance(m, dict) and m.get("id") == endpoint.served_model), models[0]
    )
    value = entry.get("max_model_len") if isinstance(entry, dict) else None
    return int(value) if isinstance(value, int | float) and value > 0 else None


def check_served_context(endpoint: Endpoint, input_lens: Iterable[int], output_len: int) -> int | None:
    """Refuse input lengths whose requests cannot fit the server's advertised context; returns that context."""
    context = served_context(endpoint)
    if context is None:
        return None
    lens = sorted(set(input_lens))
    too_long = [n for n in lens if n + output_len > context]
    if too_long:
        raise UserInputError(
            f"Input length {', '.join(map(str, too_long))} + output length {output_len} is more than the "
            f"{context}-token context the server advertises for {endpoint.served_model} (/v1/models "
            "max_model_len): every such request would be refused.",
            hint=f"Use input lengths of at most {context - output_len} (or a shorter output), or restart the "
            "server with a longer --max-model-len.",
        )
    return context
