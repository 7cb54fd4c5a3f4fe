"""The planner's SLO as a person writes it for an estimate (``ttft:500,tpot:50``, milliseconds), read by the
planner's own parser, so a page that shows an estimate judges it by the SLO the planner applied."""

from __future__ import annotations

from accelbench.domain.estimate import SLO
from accelbench.plan.estimate import parse_slo


def estimate_slo(text: str) -> SLO:
    """``text`` as the planner reads it (UserInputError for a part it does not know)."""
    return parse_slo(text)
