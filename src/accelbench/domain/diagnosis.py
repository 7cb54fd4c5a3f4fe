"""A failure accelbench can name in an installer's or an engine's log, and what it found: the types the
recogniser (``deploy/diagnose.py``) returns and the shells explain."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class KnownFailure:
    """A failure accelbench can name, with the regular expression that finds it in a log."""

    key: str
    pattern: re.Pattern[str]
    title: str
    fix: str
    action: str | None = None  # an automatic fix accelbench can offer, e.g. "clear-execstack"
    signals: tuple[int, ...] = ()  # a process killed by one of these is this failure, whatever its log says


@dataclass(frozen=True)
class Diagnosis:
    """A known failure found in a log: which one, the matching line, and values taken from it."""

    failure: KnownFailure
    line: str
    groups: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.failure.key

    def explain(self) -> str:
        """Title and fix, with values from the log (such as a library path) filled in."""
        fix = self.failure.fix.format(**self.groups) if self.groups else self.failure.fix
        return f"{self.failure.title}\nFix: {fix}"
