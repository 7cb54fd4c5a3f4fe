"""Exactness: against the streaming server in its own process, with scripted timing, the client's TTFT, TPOT, ITL
and E2EL are within 1 ms of what the server really did (its recorded write time of every chunk).

Truth per request, from the server's records: TTFT = first text chunk written - request received; E2EL = last
text chunk written - request received; ITL = gaps between text chunk writes; TPOT = (E2EL - TTFT) / (tokens - 1).
The client measures from its own send to its own reads, so the two differ by the loopback delivery time only.

What a loaded machine does and what a bug does look different: a process descheduled for a few milliseconds
makes a few reads late (one request's TTFT, one gap longer and the next shorter), while a systematic error (a
wrong chunk ending TTFT, timestamps taken after parsing, a gap per token instead of per chunk) moves every
request. Where this process may raise its scheduling priority (root or CAP_SYS_NICE), nothing waits for a CPU
and every figure must be within 1 ms of the truth. Where it may not, a sixth of each figure's reads may be late,
and each summary statistic must be within 1 ms of the truth's, or within the largest per-request deviation where
a late read moved it further (a percentile or mean of values that are each within d of the truth is within d
of the truth's).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from accelbench.bench import build_dataset, run_benchmark
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from tests.support.stream_server import spawn_server

TOLERANCE_S = 0.001
ATTEMPTS = 5


@contextlib.contextmanager
def _high_priority() -> Iterator[bool]:
    """Raise this process's scheduling priority while measuring, where allowed (root or CAP_SYS_NICE): on a
    machine shared with other work, waiting for a CPU is what makes a read late, not the client. The server
    process started meanwhile inherits the priority."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    raised = False
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, -15)
        raised = True
    try:
        yield raised
    finally:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, before)


def _measure(tmp_path: Path, script: dict, endpoint: str, strict: bool) -> tuple[list[str], dict]:
    """One benchmark against a fresh server process; returns the deviations above tolerance and the truths.
    ``strict`` (the priority was raised): every read within 1 ms; else a sixth of a figure's reads may be late."""
    # each request asks for a different number of tokens, which identifies it in the server's records
    counts = [5, 6, 7, 8, 9, 10]
    rows = [{"prompt": f"count {n} [[fixture:{json.dumps({'output_tokens': n})}]]"} for n in counts]
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = BenchConfig(
        endpoint=endpoint, dataset="jsonl", dataset_path=str(data), num_prompts=len(counts), max_concurrency=3,
        output_len=64, scrape_metrics=False,
    )  # fmt: skip
    with spawn_server("--record", "--script", json.dumps(script)) as server:
        summary = run_benchmark(Endpoint(base_url=server.base_url, served_model="fixture-model"), config)
        logs = [r for r in server.records() if r.path.endswith("completions")]
    assert summary.completed == len(counts) and summary.failed == 0
    by_tokens = {log.completion_tokens: log for log in logs}
    order = [int(p.text.split()[1]) for p in build_dataset(config, None).prompts]
    bad: list[str] = []
    truth: dict[str, list[float]] = {"ttft": [], "e2el": [], "tpot": [], "itl": []}
    # per figure: (label, how far outside the truth window, how far from the truth point) of every check
    offs: dict[str, list[tuple[str, float, float]]] = {name: [] for name in truth}
    for rec in summary.requests:
        n = order[rec.index]
        log = by_tokens[n]
        # these are exact, not timing: the request, its tokens and its number of gaps
        assert rec.output_tokens == n and rec.output_tokens_source == "usage"
        windows = log.text_windows()
        text_times = [w[0] for w in windows]
        ttft = text_times[0] - log.received
        e2el = text_times[-1] - log.received
        gaps = [b - a for a, b in itertools.pairwise(text_times)]
        tpot = (e2el - ttft) / (n - 1)
        assert rec.tpot_s is not None and len(rec.itl_s) == len(gaps)
        # (name, client value, truth low, truth high, truth point): the truth is a window when the server
        # process was descheduled between timestamping and writing a chunk
        first, last = windows[0], windows[-1]
        checks = [
            ("ttft", rec.ttft_s, first[0] - log.received, first[1] - log.received, ttft),
            ("e2el", rec.latency_s, last[0] - log.received, last[1] - log.received, e2el),
            ("tpot", rec.tpot_s, (last[0] - first[1]) / (n - 1), (last[1] - first[0]) / (n - 1), tpot),
        ]
        checks += [
            ("itl", got, b[0] - a[1], b[1] - a[0], gap)
            for got, (a, b), gap in zip(rec.itl_s, itertools.pairwise(windows), gaps, strict=True)
        ]
        for name, got, low, high, point in checks:
            off = low - got if got < low else (got - high if got > high else 0.0)
            label = f"request {n} {name}: client {got * 1000:.3f} ms, server {low * 1000:.3f}..{high * 1000:.3f} ms"
            offs[name].append((label, off, abs(got - point)))
        truth["ttft"].append(ttft)
        truth["e2el"].append(e2el)
        truth["tpot"].append(tpot)
        truth["itl"].extend(gaps)
    for name, found in offs.items():
        late = [label for label, off, _ in found if off >= TOLERANCE_S]
        if len(late) > (0 if strict else len(found) // 6):  # more than a few late reads
            bad.append(f"{len(late)} of {len(found)} {name} off by 1 ms or more: " + "; ".join(late[:3]))
    stats = {
        "ttft": (summary.ttft_ms.median, float(np.median(truth["ttft"])) * 1000),
        "e2el": (summary.e2el_ms.p99, float(np.percentile(truth["e2el"], 99)) * 1000),
        "tpot": (summary.tpot_ms.mean, float(np.mean(truth["tpot"])) * 1000),
        "itl": (summary.itl_ms.median, float(np.median(truth["itl"])) * 1000),
    }
    for name, (got_ms, want_ms) in stats.items():
        allowed_ms = (TOLERANCE_S if strict else max(TOLERANCE_S, max(d for _, _, d in offs[name]))) * 1000
        if abs(got_ms - want_ms) >= allowed_ms + 1e-6:
            bad.append(f"summary {name}: client {got_ms:.3f} ms, server {want_ms:.3f} ms")
    # the scripted timing really happened (the truth is not degenerate)
    # (a busy machine can make the server late, never early)
    assert np.min(truth["ttft"]) >= script["ttft_ms"] / 1000 - 0.0005
    return bad, truth


@pytest.mark.parametrize(
    "script",
    [
        # a role-only first chunk 5 ms after arrival, SSE comments and keep-alives between chunks
        {"ttft_ms": 40, "itl_ms": 15, "role_ms": 5, "comments": True},
        # several tokens per chunk, usage on a chunk that still has a choice, uneven tokens per request
        {"ttft_ms": 25, "itl_ms": 10, "tokens_per_chunk": 3, "usage": "with_choices"},
    ],
)
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_metrics_match_server_truth_within_1ms(tmp_path: Path, script: dict, endpoint: str) -> None:
    # A loaded machine can deschedule either process for milliseconds; that is not the client's error. A
    # systematic error (a wrong chunk ending TTFT, timestamps taken after parsing, ...) fails every attempt.
    # Without the priority (no root or CAP_SYS_NICE) a busy machine makes a few reads late in most attempts:
    # each attempt then allows a sixth of a figure's reads to be late (see the docstring); with it, none.
    attempts = []
    with _high_priority() as strict:
        for _ in range(ATTEMPTS):
            bad, _truth = _measure(tmp_path, script, endpoint, strict)
            if not bad:
                return
            attempts.append(bad)
    pytest.fail(
        "deviations of 1 ms or more in every attempt:\n" + "\n".join("; ".join(a[:5]) for a in attempts)
    )
