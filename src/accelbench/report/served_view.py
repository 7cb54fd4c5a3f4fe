"""What one stored run served and how well it answered, as rows for its page, ``runs show`` and the report.

Reads the run's ``extra["served"]`` (``bench/served_identity.py``) and ``extra["quality"]``
(``bench/quality.py``); a field nobody reported is shown as unknown, with no source.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelbench.bench.quality_run import quality_line
from accelbench.bench.served_identity import FIELDS
from accelbench.domain.results import RunInfo
from accelbench.report.like_for_like import show_value


def served_rows(run: RunInfo) -> list[tuple[str, str, str]]:
    """(what, value, where it was read) for every recorded field; empty when the run recorded none."""
    served = (run.extra or {}).get("served")
    if not isinstance(served, Mapping):
        return []
    rows = []
    for name, words in FIELDS.items():
        found = served.get(name)
        entry: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        rows.append(
            (words[:1].upper() + words[1:], show_value(entry.get("value")), str(entry.get("source") or "-"))
        )
    return rows


def quality_text(run: RunInfo) -> str | None:
    """The run's quality in one sentence (``quality_line``), or None when it measured none."""
    quality = (run.extra or {}).get("quality")
    return quality_line(quality) if isinstance(quality, dict) else None


def quality_rows(run: RunInfo) -> list[tuple[str, str, str]]:
    """(kind of task, right of asked, accuracy) per task kind of the run's quality probe."""
    quality = (run.extra or {}).get("quality")
    by_task = quality.get("by_task") if isinstance(quality, dict) else None
    if not isinstance(by_task, Mapping):
        return []
    return [
        (kind, f"{t.get('correct')} of {t.get('tasks')}", f"{(t.get('accuracy') or 0):.0%}")
        for kind, t in by_task.items()
        if isinstance(t, Mapping)
    ]


def served_context(run: RunInfo) -> dict[str, Any]:
    """What a run's page shows of it: ``served`` rows and ``quality`` (its sentence and rows per task kind)."""
    return {"served": served_rows(run), "quality": {"text": quality_text(run), "rows": quality_rows(run)}}
