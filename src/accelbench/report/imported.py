"""What an imported run's figures mean: the definition differences its importer noted (``bench.importers``) and
the figures kept under the tool's own names (``run.extra['tool_metrics']``), as sentences for ``runs show``."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.domain.results import ResultInfo, RunInfo


def definition_lines(run: RunInfo, results: Sequence[ResultInfo]) -> list[str]:
    """One sentence per distinct note of the run's cells (where it came from left out), then one per figure kept
    under the tool's name: whether it compares with accelbench's and how it differs. Empty for a run that was
    not imported."""
    if run.kind != "import":
        return []
    lines: list[str] = []
    for r in results:
        for note in r.summary.get("notes") or []:
            if isinstance(note, str) and not note.startswith("Imported from") and note not in lines:
                lines.append(note)
    seen: set[str] = set()
    for cell in (run.extra or {}).get("tool_metrics") or []:
        for m in cell.get("metrics") or []:
            name = str(m.get("name"))
            if name in seen:
                continue
            seen.add(name)
            kind = "comparable" if m.get("comparable") else "not directly comparable"
            lines.append(
                f"{name} ({m.get('unit')}), kept under the tool's name, {kind}: {m.get('difference')}"
            )
    return lines
