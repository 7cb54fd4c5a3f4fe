"""Keep secrets out of API responses and pages, whatever a stored record happens to contain.

RunSpec already drops ``hf_token`` from every dump; this is the second line: environment or engine settings
that name a token, password or key are shown as ``***``.
"""

from __future__ import annotations

import re
from typing import Any

# Matched at the end of a key, so ``hf_token`` and ``HF_TOKEN`` are masked but ``max_num_batched_tokens`` is not.
_SECRET_KEY = re.compile(r"(token|secret|password|passwd|api[_-]?key|credentials?|authorization)$", re.I)
MASK = "***"


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def redact(obj: Any) -> Any:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if isinstance(k, str) and _SECRET_KEY.search(k) and isinstance(v, str | int | float) and v != "":
                out[k] = MASK
            else:
                out[k] = redact(v)
        return out
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj
