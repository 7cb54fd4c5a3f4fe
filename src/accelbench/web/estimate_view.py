"""What the Estimate page shows of a ranked estimate: each row's SLO verdict in words (met, or which target it
misses and by how much), where the store measured the model, the sort keys of its columns, and the cost vs
latency chart's data. The ranking itself is the planner's (``plan/ranking.py`` ``rank_key``: with an SLO the
rows that meet it first, then by cost); the page keeps that order and lets a reader sort by any column."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from accelbench.domain.estimate import SLO, range_bases
from accelbench.report.formatting import fmt_num
from accelbench.report.percentiles import label
from accelbench.services.estimate_slo import estimate_slo

TIER_LABEL = {"gpu": "GPU", "neuron": "Neuron", "cpu": "CPU"}
#: an SLO's targets as the estimate row holds their predictions: (target field, row field, what it is)
TARGETS = (("ttft_ms", "ttft_ms", "TTFT"), ("tpot_ms", "tpot_ms", "TPOT"), ("e2e_ms", "e2e_ms", "E2E"))
#: the planner predicts the typical (median) request: the chart and the columns say so
PREDICTED = label(50)


def slo_of(result: Mapping[str, Any], text: str | None) -> SLO | None:
    """The SLO the estimate was asked for: the ranked table carries it; one instance's answer does not, so
    it is read from the form (the planner's own parser, already applied to the same text)."""
    raw = result.get("slo")
    if isinstance(raw, Mapping):
        return SLO.model_validate(raw)
    if text:
        return estimate_slo(text)
    return None


def _ms(value: float) -> str:
    return fmt_num(value, 2 if value < 100 else 0)


def slo_verdict(row: Mapping[str, Any], slo: SLO | None, concurrency: int) -> dict[str, Any]:
    """One row against the SLO, from the row's own verdict (``slo_met``, ``max_concurrency_meeting_slo``) and
    predictions: ``state`` met / missed / none (no SLO) / unfit, the words, the misses (metric, predicted,
    target, by how much) and a sort key (met first, then the smallest miss)."""
    if slo is None:
        return {"state": "none", "text": "", "misses": [], "sort": 0.0}
    if not row.get("feasible"):
        return {"state": "unfit", "text": "does not fit", "misses": [], "sort": 1e9}
    misses = []
    for target_field, row_field, name in TARGETS:
        target, predicted = getattr(slo, target_field), row.get(row_field)
        if target is None or predicted is None or predicted <= target:
            continue
        over = (predicted - target) / target * 100
        misses.append(
            {
                "metric": name,
                "predicted": predicted,
                "target": target,
                "over_pct": over,
                "text": f"{name} {_ms(predicted)} ms > {target:g} ms (+{over:.0f}%)",
            }
        )
    best = row.get("max_concurrency_meeting_slo")
    if row.get("slo_met"):
        room = f"; up to {best} in flight" if best and best > concurrency else ""
        return {"state": "met", "text": f"met{room}", "misses": [], "sort": 0.0}
    text = "missed: " + "; ".join(m["text"] for m in misses) if misses else "missed"
    if best:
        text += f" (met up to {best} in flight)"
    elif best == 0:
        text += " (even at 1 in flight)"
    worst = max((m["over_pct"] for m in misses), default=0.0)
    return {"state": "missed", "text": text, "misses": misses, "sort": 1.0 + worst / 100}


def measured_text(row: Mapping[str, Any]) -> dict[str, str] | None:
    """The instance cell's badge: measured (this model has runs here), or the other models that do."""
    if row.get("has_benchmark_data"):
        return {"kind": "measured", "text": "measured", "title": "the store has runs of this model here"}
    others = row.get("measured_other_models") or []
    if others:
        names = ", ".join(others)
        return {
            "kind": "other",
            "text": f"other model measured here: {names}",
            "title": f"the store's runs on this instance are of {names}, not of this model",
        }
    return None


def why_short(row: Mapping[str, Any]) -> str:
    """The Why cell's one-line summary (the whole sentence opens under it): what bounds the speed, e.g.
    "decode memory-bound", or "why it does not fit"."""
    text = str(row.get("explanation") or "")
    if not row.get("feasible"):
        return "why it does not fit" if text else ""
    head, sep, _ = text.partition(":")
    return head if sep and len(head) <= 40 else text[:40]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def chart_metric(slo: SLO | None) -> str:
    """The chart's x axis: the latency the SLO targets (TPOT when it targets it, else TTFT), else TPOT."""
    if slo is not None and slo.tpot_ms is None and slo.ttft_ms is not None:
        return "ttft"
    return "tpot"


def chart(rows: list[dict[str, Any]], slo: SLO | None) -> dict[str, Any] | None:
    """Cost vs latency: each feasible, priced row a point (x the predicted TTFT or TPOT, y $ per 1M output
    tokens), one trace per SLO verdict, the instance named on hover, the SLO's target marked on x."""
    metric = chart_metric(slo)
    name = metric.upper()
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        x, y = _num(r.get(f"{metric}_ms")), _num(r.get("usd_per_million_output_tokens"))
        if not r.get("feasible") or x is None or y is None or x <= 0 or y <= 0:
            continue
        state = r["slo"]["state"]
        groups.setdefault(state, []).append(
            {
                "x": x,
                "y": y,
                "instance": r["instance"],
                "tier": TIER_LABEL.get(str(r.get("accelerator_type"))),
            }
        )
    if not groups:
        return None
    names = {"met": "meets the SLO", "missed": "misses the SLO", "none": "fits"}
    traces = [
        {
            "name": names[state],
            "state": state,
            "x": [p["x"] for p in pts],
            "y": [p["y"] for p in pts],
            "text": [f"{p['instance']} ({p['tier']})" for p in pts],
        }
        for state in ("met", "missed", "none")
        if (pts := groups.get(state))
    ]
    xs = [p["x"] for pts in groups.values() for p in pts]
    ys = [p["y"] for pts in groups.values() for p in pts]
    target = getattr(slo, f"{metric}_ms") if slo is not None else None
    return {
        "title": f"Cost vs predicted {name}" + (f" (SLO: {slo.label()})" if slo is not None else ""),
        "x_title": f"predicted {name} {PREDICTED} (ms)",
        "y_title": "$ per 1M output tokens",
        "x_log": max(xs) / min(xs) > 20,
        "y_log": max(ys) / min(ys) > 20,
        "target": target,
        "target_label": f"{name} target {target:g} ms" if target is not None else None,
        "traces": traces,
    }


def _sort_num(value: Any) -> str:
    """A cell's sort key: the number, or empty (sorted last either way)."""
    v = _num(value)
    return "" if v is None else repr(v)


#: the figures whose 80% range the page shows, with their units as the columns write them
RANGED = (
    ("ttft_ms", "TTFT", " ms"),
    ("tpot_ms", "TPOT", " ms"),
    ("output_tokens_per_s", "output tok/s", ""),
    ("usd_per_million_output_tokens", "$/1M output tok", ""),
)


def range_texts(row: Mapping[str, Any]) -> dict[str, str]:
    """Each ranged figure's "80% range 160-230 ms", by field; a cost with dollars."""
    out: dict[str, str] = {}
    for key, _, unit in RANGED:
        r = (row.get("ranges") or {}).get(key)
        if not isinstance(r, Mapping) or r.get("p10") is None or r.get("p90") is None:
            continue
        lo, hi = float(r["p10"]), float(r["p90"])
        if key.startswith("usd"):
            out[key] = f"80% range ${lo:,.2f}-${hi:,.2f}"
        else:
            out[key] = f"80% range {_ms(lo)}-{_ms(hi)}{unit}"
    return out


def _bases(row: Mapping[str, Any]) -> str:
    """What the ranges rest on (``range_bases``): once, or each with its figure."""
    ranges = row.get("ranges") or {}
    said = range_bases({key: (r or {}).get("basis") for key, r in ranges.items()})
    if not said:
        return ""
    if said[0][0] is None:
        return f" ({said[0][1]})"
    return " (" + "; ".join(f"{name}: {b}" for name, b in said) + ")"


def range_summary(row: Mapping[str, Any]) -> str:
    """One line for the Why cell: each figure's range, what they rest on, and the neighbours whose cost range
    overlaps (the order between them is not certain)."""
    texts = range_texts(row)
    parts = [f"{name} {texts[key].removeprefix('80% range ')}" for key, name, _ in RANGED if key in texts]
    if not parts:
        return ""
    line = "80% ranges: " + ", ".join(parts) + _bases(row)
    overlaps = row.get("range_overlaps") or []
    if overlaps:
        line += f". Cost range overlaps {', '.join(overlaps)}: the order between them is not certain"
    return line + "."


def refusal_view(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """One instance that cannot serve the model as asked: the reason (once), the way forward, the cheapest
    instances that serve it instead with their predicted TTFT, TPOT, output tok/s and $ per 1M output tokens,
    and the changes of the reader's own settings that would make this instance work (the reader's choice).
    The planner's refusal model (``plan/refusal.py``), shown open, never as a row of dashes. None when the
    result is a ranked table or a feasible estimate."""
    est = result.get("estimate")
    if not isinstance(est, Mapping) or est.get("feasible"):
        return None
    rec = est.get("recommendation") or {}
    refusal = rec.get("refusal") or {}
    alternatives = [
        dict(a)
        | {"tier_label": TIER_LABEL.get(str(a.get("accelerator_type")), str(a.get("accelerator_type")))}
        for a in rec.get("alternatives") or []
    ]
    return {
        "instance": est.get("instance"),
        "reason": refusal.get("reason") or est.get("explanation") or "does not fit",
        "way_forward": list(refusal.get("way_forward") or []),
        "alternatives": alternatives,
        "predicted_for": next((a.get("predicted_for") for a in alternatives if a.get("predicted_for")), None),
        "changes": list(refusal.get("changes") or []),
    }


def estimate_page_view(
    result: Mapping[str, Any], *, slo_text: str | None = None, concurrency: int = 1
) -> dict[str, Any]:
    """The page's rows (the planner's order, numbered), each with its SLO verdict, badge and sort keys; the
    summary, notes, counts and the chart."""
    slo = slo_of(result, slo_text)
    rows = []
    for rank, raw in enumerate(result.get("rows") or [], start=1):
        row = dict(raw)
        row["rank"] = rank
        row["tier_label"] = TIER_LABEL.get(str(row.get("accelerator_type")), str(row.get("accelerator_type")))
        row["slo"] = slo_verdict(row, slo, concurrency)
        row["badge"] = measured_text(row)
        row["why_short"] = why_short(row)
        row["range_text"] = range_texts(row)
        row["range_summary"] = range_summary(row)
        row["fits"] = (
            ("yes, quantized" if row.get("quantization_required") else "yes") if row.get("feasible") else "no"
        )
        row["sort"] = {
            key: _sort_num(row.get(key))
            for key in ("tensor_parallel_size", "ttft_ms", "tpot_ms", "e2e_ms", "output_tokens_per_s",
                        "total_tokens_per_s", "hourly_usd", "usd_per_million_output_tokens",
                        "max_concurrency_meeting_slo")
        }  # fmt: skip
        rows.append(row)
    counts = {"met": 0, "missed": 0, "unfit": 0, "none": 0}
    for r in rows:
        counts[r["slo"]["state"]] += 1
    return {
        "rows": rows,
        "refusal": refusal_view(result),
        "summary": result.get("summary") or {},
        "notes": result.get("notes") or [],
        "total_rows": result.get("total_rows", len(rows)),
        "slo": slo.label() if slo is not None else None,
        "counts": counts,
        "predicted": PREDICTED,
        "chart": chart(rows, slo),
    }
