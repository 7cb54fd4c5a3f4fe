"""JSON responses that never fail on infinite or NaN floats.

Specs carry ``request_rate: inf`` ("all at once"); the domain writes it as the string "Infinity" (pydantic
reads it back as a float), and these responses do the same for any float that slips through, instead of the
500 a strict JSON encoder would produce.
"""

from __future__ import annotations

import json
import math
from typing import Any

from fastapi.responses import JSONResponse


def finite(obj: Any) -> Any:
    if isinstance(obj, float):
        if math.isnan(obj):
            return "NaN"
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return obj
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


class SafeJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        try:
            text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except ValueError:
            text = json.dumps(finite(content), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        try:
            return text.encode()
        except UnicodeEncodeError:  # a lone surrogate stored before input was checked: escape it, as JSON may
            return json.dumps(
                finite(content), ensure_ascii=True, allow_nan=False, separators=(",", ":")
            ).encode()
