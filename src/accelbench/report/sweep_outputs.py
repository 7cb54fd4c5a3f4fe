"""The files a sweep leaves in ``--out DIR``, written from the store (so ``sweep-plot`` can rewrite them later):

- ``results.md``: what was measured (run, server, engine, environment, spec) and the per-cell table;
- ``results.csv``: the same table, machine-readable: per input length and concurrency the mean of the repeat
  medians of TTFT, TPOT, ITL and E2E latency, output and total token throughput, completed and failed
  requests, plus ``_min``/``_max`` columns when a cell has more than one repeat;
- ``results.json``: the run(s) and the aggregated cells as JSON;
- ``repeats/``: one JSON file per (cell, repeat) in the layout of ``vllm bench serve --save-result``
  (per-request arrays included), readable by accelbench and by vLLM's own tooling;
- PNG plots: median TPOT, median TTFT and token throughput against concurrency, one line per input length
  (per run and input length when several runs are given).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.bench.results_io import write_result  # the vLLM save-result layout lives with the engine
from accelbench.domain.results import ResultInfo, RunInfo
from accelbench.domain.run import CellStatus
from accelbench.report.attribution import model_label, ran_here, tokenizer_of, where_label
from accelbench.report.capacity_results import markdown_section
from accelbench.report.formatting import MISSING
from accelbench.report.plots import write_sweep_plots
from accelbench.report.tables import (
    CellAggregate,
    aggregate_results,
    csv_header,
    csv_rows,
    has_repeats,
    markdown_table,
    table_headers,
    table_rows,
)
from accelbench.store.repo import Store
from accelbench.telemetry.host import describe_environment


@dataclass
class SweepOutputs:
    """Paths written by ``write_sweep_outputs``."""

    out_dir: Path
    markdown: Path
    csv: Path
    json: Path
    repeat_files: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)

    def all_paths(self) -> list[Path]:
        return [self.markdown, self.csv, self.json, *self.plots, *self.repeat_files]


def run_display_name(run: RunInfo) -> str:
    """A short name for a run in legends and tables: its label, else its id."""
    return run.label or run.id


def repeat_filename(r: ResultInfo) -> str:
    """``input128_conc4_rep1.json`` (repeats counted from 1 for people)."""
    return f"input{r.input_len}_conc{r.concurrency}_rep{r.repeat + 1}.json"


def _spec_lines(spec: Mapping[str, Any]) -> list[str]:
    sweep = spec.get("sweep") if isinstance(spec.get("sweep"), dict) else None
    if not sweep:
        return []
    keys = (
        "input_lens",
        "concurrency",
        "repeats",
        "prompts_per_concurrency",
        "output_len",
        "endpoint",
        "dataset",
        "request_rate",
        "ignore_eos",
        "num_warmups",
        "prefix_len",
        "seed",
    )
    return [f"- `{k}`: {sweep[k]}" for k in keys if k in sweep]


def render_markdown(
    runs: Sequence[RunInfo],
    cells: Sequence[CellAggregate],
    *,
    results: Sequence[ResultInfo] = (),
    plots: Sequence[Path] = (),
    out_dir: Path | None = None,
) -> str:
    """The text of ``results.md`` for one run or several."""
    multi = len(runs) > 1
    names = {r.id: run_display_name(r) for r in runs}
    title = "Sweep results" if not multi else "Sweep results: " + " vs ".join(names.values())
    parts = [f"# {title}\n"]
    for run in runs:
        head = f"## {names[run.id]}" if multi else "## Run"
        lines = [head, "", f"- Run: `{run.id}` ({run.kind}), status **{run.status.value}**"]
        if run.error:
            lines.append(f"- Reason: {run.error}")
        if run.label and not multi:
            lines.append(f"- Label: {run.label}")
        for label, value in (
            ("Model", model_label(run)),
            ("Tokenizer", tokenizer_of(run)),
            ("Server", run.base_url),
            ("Engine", " ".join(x for x in (run.engine, run.engine_version) if x) or None),
            ("Where", where_label(run)),
            ("Started", run.started_at.isoformat(timespec="seconds") if run.started_at else None),
            ("Finished", run.finished_at.isoformat(timespec="seconds") if run.finished_at else None),
        ):
            if value and value != MISSING:
                lines.append(f"- {label}: {value}")
        lines.append(f"- Requests: {run.completed_requests} completed, {run.failed_requests} failed")
        spec = _spec_lines(run.spec)
        if spec:
            lines += ["", "Spec:", "", *spec]
        env = describe_environment(run.environment)
        if env:
            lines += ["", "Environment:", ""]
            lines += [f"- {k}: {v}" if k != "Command" else f"- {k}: `{v}`" for k, v in env]
        parts.append("\n".join(lines) + "\n")
    for run in runs:  # a capacity search's answer before its cells (the probes)
        section = markdown_section(run, names[run.id] if multi else "")
        if section:
            parts.append(section)
    rng = has_repeats(cells)
    parts.append("## Results\n")
    if cells:
        explain = "Each figure is the mean over repeats of each repeat's median"
        explain += " (min-max over repeats in parentheses)." if rng else "."
        explain += " Latencies in ms; throughputs in tokens/s over each repeat's wall time."
        parts.append(explain + "\n")
        parts.append(
            markdown_table(
                table_headers(with_run=multi),
                table_rows(cells, with_range=rng, with_run=multi, run_names=names),
            )
        )
    else:
        parts.append("No results stored.\n")
    notes = _notes(cells, results, names if multi else None)
    if notes:
        parts.append("## Notes\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    if plots:
        parts.append("## Plots\n")
        for p in plots:
            rel = p.relative_to(out_dir) if out_dir and p.is_relative_to(out_dir) else p
            parts.append(f"![{p.stem.replace('_', ' ')}]({rel.as_posix()})\n")
    return "\n".join(parts)


def _notes(
    cells: Sequence[CellAggregate], results: Sequence[ResultInfo], names: Mapping[str, str] | None
) -> list[str]:
    notes = []
    for c in cells:
        where = f"input {c.input_len}, concurrency {c.concurrency}"
        if names:
            where = f"{names.get(c.run_id, c.run_id)}: {where}"
        if c.status == CellStatus.partial:
            notes.append(f"{where}: interrupted; the figures come from the requests that finished.")
        elif c.status == CellStatus.failed:
            notes.append(f"{where}: no request succeeded.")
        elif c.partial_repeats or c.failed_repeats:
            notes.append(
                f"{where}: {c.partial_repeats} partial and {c.failed_repeats} failed repeat(s) left out of the figures."
            )
    errors: dict[str, int] = {}
    notes_seen: set[str] = set()
    for r in results:
        for reason, n in (r.summary.get("errors") or {}).items():
            errors[reason] = errors.get(reason, 0) + int(n)
        for note in r.summary.get("notes") or []:
            if note not in notes_seen:
                notes_seen.add(note)
                notes.append(
                    f"input {r.input_len}, concurrency {r.concurrency}, repeat {r.repeat + 1}: {note}"
                )
        check = r.summary.get("prompt_token_check") or {}
        if check.get("mismatched"):
            notes.append(
                f"input {r.input_len}, concurrency {r.concurrency}, repeat {r.repeat + 1}: "
                f"{check['mismatched']} of {check.get('checked')} prompts differ from the server's token count "
                f"(max deviation {check.get('max_abs_deviation')})."
            )
    for reason, n in sorted(errors.items(), key=lambda kv: -kv[1]):
        notes.append(f"{n} failed request(s): {reason}")
    return notes


def write_csv(path: Path, cells: Sequence[CellAggregate], *, with_range: bool) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(csv_header(with_range=with_range))
        w.writerows(csv_rows(cells, with_range=with_range))


def write_sweep_outputs(
    store: Store,
    run_ids: str | Sequence[str],
    out_dir: Path,
    *,
    repeat_json: bool = True,
    plots: bool = True,
) -> SweepOutputs:
    """Write the sweep's files for one run (or several, compared) into ``out_dir`` and return their paths.

    With several runs the tables get a Run column, the plots one line per run and input length, and the
    per-repeat JSON files go into ``repeats/<run id>/``.
    """
    ids = [run_ids] if isinstance(run_ids, str) else list(dict.fromkeys(run_ids))
    runs = [store.get_run(ref) for ref in ids]
    multi = len(runs) > 1
    results: list[ResultInfo] = []
    for run in runs:
        results += store.get_results(run.id)
    cells = aggregate_results(results)
    out_dir.mkdir(parents=True, exist_ok=True)
    outputs = SweepOutputs(
        out_dir=out_dir,
        markdown=out_dir / "results.md",
        csv=out_dir / "results.csv",
        json=out_dir / "results.json",
    )
    if repeat_json:
        for r in results:
            sub = out_dir / "repeats" / (r.run_id if multi else "")
            sub.mkdir(parents=True, exist_ok=True)
            path = sub / repeat_filename(r)
            write_result(store.get_summary(r.id), path)
            outputs.repeat_files.append(path)
    names = {r.id: run_display_name(r) for r in runs}
    if plots:
        subtitle = None
        if not multi:
            run = runs[0]
            subtitle = " · ".join(
                x
                for x in (
                    run.label,
                    model_label(run),
                    " ".join(y for y in (run.engine, run.engine_version) if y),
                    (run.environment.get("cpu") or {}).get("model") if ran_here(run) else where_label(run),
                )
                if x and x != MISSING
            )
        outputs.plots = write_sweep_plots(cells, out_dir, run_names=names, subtitle=subtitle or None)
    rng = has_repeats(cells)
    write_csv(outputs.csv, cells, with_range=rng)
    outputs.markdown.write_text(
        render_markdown(runs, cells, results=results, plots=outputs.plots, out_dir=out_dir)
    )
    outputs.json.write_text(
        json.dumps(
            {
                "runs": [r.model_dump(mode="json") for r in runs],
                "cells": [c.model_dump(mode="json") for c in cells],
                "files": {
                    "repeats": [p.relative_to(out_dir).as_posix() for p in outputs.repeat_files],
                    "plots": [p.relative_to(out_dir).as_posix() for p in outputs.plots],
                },
            },
            indent=2,
            allow_nan=False,
        )
        + "\n"
    )
    return outputs
