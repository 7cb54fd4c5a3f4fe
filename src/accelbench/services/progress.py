"""Where a long use case (an install, a model's preparation, a run) reports its steps: the shells subclass
``Progress`` (the CLI draws a status line, the worker stores the run's progress) and hand it to ``services``."""

from __future__ import annotations

from accelbench.deploy.target import NO_PROGRESS, Progress

__all__ = ["NO_PROGRESS", "Progress"]
