"""The SLO parser: ``ttft:500,tpot:50`` (milliseconds) into an ``SLO``."""

from __future__ import annotations

from accelbench.domain.estimate import SLO
from accelbench.errors import UserInputError


def parse_slo(text: str) -> SLO:
    """``ttft:500,tpot:50`` (ms; ``e2e`` too) into an SLO."""
    values: dict[str, float] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, val = part.partition(":")
        key = key.strip().lower()
        if not sep or key not in ("ttft", "tpot", "e2e"):
            raise UserInputError(
                f"Bad SLO part {part!r}.", hint="Write e.g. --slo ttft:500,tpot:50 (milliseconds)."
            )
        try:
            values[f"{key}_ms"] = float(val.strip().removesuffix("ms"))
        except ValueError:
            raise UserInputError(f"Bad SLO value {val!r} for {key}: give milliseconds.") from None
        if values[f"{key}_ms"] <= 0:
            raise UserInputError(f"SLO {key} must be positive.")
    if not values:
        raise UserInputError("Empty SLO.", hint="Write e.g. --slo ttft:500,tpot:50.")
    return SLO(**values)
