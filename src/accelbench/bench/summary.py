"""A finished run's records to its summary: one ``RequestRecord`` per request sent (output tokens from the
server's usage, else the tokenizer, else the chunks), the figures (``metrics.compute_metrics``: percentiles,
throughput, goodput) over the requests outside the ramp, the telemetry scraped during the run, and the notes that
say what a reader must know (a client that sent late, prompt-token deviations, where token counts came from, a
cancel, a load plan or a duration that ended the run, failures, the cost of scraping, the prefix cache)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from accelbench.bench import ramp
from accelbench.bench import stages as stages_mod
from accelbench.bench.collector import CANCELLED
from accelbench.bench.load.sending import Sending, Stop
from accelbench.bench.metrics import Metrics, compute_metrics
from accelbench.bench.prompts import PromptSource
from accelbench.bench.stream_parse import ParsedStream
from accelbench.bench.tokenizer import Tokenizer
from accelbench.bench.turns import turn_metrics
from accelbench.domain.bench_summary import ITL_COUNTING, BenchmarkSummary, TelemetrySample, TelemetrySummary
from accelbench.domain.device import DeviceTelemetry, device_notes
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.domain.request_record import RequestRecord
from accelbench.redact import redact_url
from accelbench.telemetry.prometheus import PrometheusScraper

#: A run whose scheduling lag exceeds these (ms) gets a note that the client was the bottleneck.
LAG_NOTE_P50_MS = 2.0
LAG_NOTE_P99_MS = 10.0
#: A run whose /metrics scrapes took longer than this on average (ms) gets a note about the cost of scraping.
SCRAPE_NOTE_MS = 10.0


class RunOutcome(Protocol):
    """What a finished run hands to ``summarize`` (the runner's run itself): what was asked (``endpoint``,
    ``config``, ``n`` requests from ``source``), what happened (``sending``: the collector, the stop and the
    clock's start in perf_counter; ``wall0``, that start in wall time), what was scraped and sampled, and the
    notes so far."""

    endpoint: Endpoint
    config: BenchConfig
    tokenizer: Tokenizer | None
    source: PromptSource
    n: int
    sending: Sending
    wall0: float
    scraper: PrometheusScraper | None
    device_tel: DeviceTelemetry | None
    notes: list[str]
    date: datetime


def summarize(o: RunOutcome) -> BenchmarkSummary:
    """The run's summary (see the module docstring)."""
    config, n, col, t0, wall0 = o.config, o.n, o.sending.col, o.sending.t0, o.wall0
    sent = [i for i in range(n) if col.sent[i]]
    records = _records(o, sent)
    left_out = ramp.mark(records, config.ramp_up_s)
    kept = {r.index for r in ramp.measured(records)}
    ends = [col.times[i][1] for i in sent if i in kept]
    starts = [col.times[i][0] for i in sent if i in kept]
    first = min(starts) if starts else t0
    last = max(ends) if ends else t0
    duration = max(0.0, last - first)
    m = compute_metrics(ramp.measured(records), duration, config.goodput)

    notes = list(o.notes)
    notes.extend(_metric_notes(config, m, n, left_out, len(records)))
    sent_notes, interrupted = _sent_notes(config, o.sending.stop, m, n, records, len(sent))
    notes.extend(sent_notes)
    telemetry, samples = _telemetry(o, notes)
    if o.device_tel is not None:
        notes.extend(device_notes(o.device_tel, m.total_output_tokens))
    return BenchmarkSummary(
        label=config.label,
        date=o.date.isoformat(timespec="seconds"),
        base_url=redact_url(o.endpoint.base_url),  # the record never keeps a URL's password
        model_id=o.endpoint.served_model,
        tokenizer_id=o.tokenizer.name if o.tokenizer is not None else "",
        config=config,
        started_at=wall0 + (first - t0),
        finished_at=wall0 + (last - t0),
        duration_s=duration,
        num_prompts=n,  # a trace shorter than num_prompts replays what it has
        **dict(m),
        telemetry=telemetry,
        telemetry_samples=samples,
        device_telemetry=o.device_tel,
        requests=records,
        notes=notes,
        interrupted=interrupted,
        ramp_requests=left_out,
        itl_counting=ITL_COUNTING[config.metrics_definition],
        expected_prefix_hit_rate=o.source.expected_prefix_hit_rate,
        per_turn=turn_metrics(records),
        per_stage=stages_mod.stage_metrics(config.stages, records) if config.stages else [],
    )


def _records(o: RunOutcome, sent: list[int]) -> list[RequestRecord]:
    """One record per request sent, in order; a request still in flight when a cancel came is failed with the
    reason ``cancelled``."""
    config, col, tokenizer, t0 = o.config, o.sending.col, o.tokenizer, o.sending.t0
    parsed: dict[int, ParsedStream] = {}
    for i in sent:
        if col.raw[i] is None and col.parsed[i] is None:
            # sent but never finished: only possible when the run was cancelled mid-request
            parsed[i] = ParsedStream(error=CANCELLED)
            col.times[i] = (col.eligible[i], col.eligible[i])
        else:
            parsed[i] = col.result(i)
    # Output tokens: the server's usage, else the tokenizer on the text, else the number of text chunks.
    need_count = [i for i in sent if parsed[i].success and parsed[i].completion_tokens is None]
    counted: dict[int, int] = {}
    if need_count and tokenizer is not None:
        counts = tokenizer.count_output([parsed[i].text for i in need_count])
        counted = dict(zip(need_count, counts, strict=True))
    records: list[RequestRecord] = []
    for i in sent:
        p = parsed[i]
        start = col.times[i][0]
        if p.success and p.completion_tokens is not None:
            out_tokens, source = p.completion_tokens, "usage"
        elif p.success and i in counted:
            out_tokens, source = counted[i], "tokenizer"
        elif p.success:
            out_tokens, source = p.text_chunks, "chunks"
        else:
            out_tokens, source = 0, "none"
        records.append(
            RequestRecord(
                index=i,
                prefix_group=col.group[i],
                prompt_len=col.prompt_len[i] or 0,
                server_prompt_tokens=p.prompt_tokens,
                max_tokens=col.max_tokens[i] or config.output_len,
                output_tokens=out_tokens,
                output_tokens_source=source,
                planned_send_s=col.eligible[i] - t0,
                queue_s=max(0.0, col.eligible[i] - col.scheduled[i]),
                start_s=start - t0,
                ttft_s=p.ttft or 0.0,
                itl_s=p.itl,
                latency_s=p.latency or 0.0,
                success=p.success,
                error=p.error or "",
                generated_text=p.text,
                **col.token_split(i, parsed, tokenizer, out_tokens, source),
            )
        )
    if config.stages:
        for r in records:
            r.stage = stages_mod.stage_of(config.stages, r.planned_send_s)  # when the plan let it go
    if config.turns > 1:
        for r in records:
            r.session, r.turn = divmod(r.index, config.turns)
            r.turn += 1
    return records


def _metric_notes(config: BenchConfig, m: Metrics, n: int, left_out: int, n_records: int) -> list[str]:
    """What the figures need said: the ramp left out, a client that sent late, prompt-token deviations, where
    the output token counts came from."""
    notes: list[str] = []
    if config.ramp_up_s:
        streams = min(config.max_concurrency or n, n)
        notes.append(ramp.note(streams, config.ramp_up_s, left_out, n_records))
    lag = m.scheduling_lag_ms
    if lag.count and (lag.p50 > LAG_NOTE_P50_MS or lag.p99 > LAG_NOTE_P99_MS):
        notes.append(
            f"The client sent requests late (scheduling lag p50 {lag.p50:.1f} ms, p99 {lag.p99:.1f} ms): "
            "the client, not the server, limited how fast requests went out; latencies are still measured "
            "from the actual send."
        )
    check = m.prompt_token_check
    if check.mismatched:
        notes.append(
            f"{check.mismatched} of {check.checked} requests: the server counted a different number of prompt "
            f"tokens than the client expected (largest difference {check.max_abs_deviation}, mean "
            f"{check.mean_deviation:+.2f}); throughput uses the server's counts."
        )
    if m.output_tokens_source in ("tokenizer", "mixed"):
        notes.append(
            "The server sent no usage for some requests; their output tokens were counted with the tokenizer."
        )
    elif m.output_tokens_source == "chunks":
        notes.append(
            "The server sent no usage and no tokenizer was available: output tokens are the number of text "
            "chunks (TPOT and token throughput may be off)."
        )
    return notes


def _sent_notes(
    config: BenchConfig, stop: Stop, m: Metrics, n: int, records: list[RequestRecord], n_sent: int
) -> tuple[list[str], bool]:
    """What ended the run (a cancel, the load plan, the duration, too few requests) and its failures, and
    whether it counts as interrupted (ending at the plan's end or the duration is what was asked for)."""
    notes: list[str] = []
    interrupted = stop.cancelled or n_sent < n
    if stop.cancelled:
        notes.append(f"Cancelled: {n_sent} of {n} requests were sent; unfinished ones are failed.")
    elif config.stages:
        end = stages_mod.stage_starts(config.stages)[-1]
        notes.append(
            f"Load plan: {len(config.stages)} stage(s) over {end:g} s ("
            + "; ".join(stages_mod.describe(st) + f" for {st.duration_s:g} s" for st in config.stages)
            + f"); {n_sent} requests sent"
            + (
                f", all {n} that num_prompts allows, so the plan ran out of requests early"
                if n_sent >= n
                else ""
            )
            + "."
        )
        interrupted = False  # the plan's end is what was asked for
    elif stop.duration_hit:
        notes.append(f"--duration {config.duration_s:g} s reached: {n_sent} of {n} requests were sent.")
        interrupted = False  # stopping at the duration is what was asked for
    elif n_sent < n:
        notes.append(f"Only {n_sent} of {n} requests were sent.")
    if m.failed:
        top = next(iter(m.errors.items()))
        notes.append(
            f"{m.failed} request{'s' if m.failed != 1 else ''} failed; most common reason ({top[1]}x): {top[0]}"
        )
    if config.stages and len(records) >= n:
        plan_end = stages_mod.stage_starts(config.stages)[-1]
        last_sent = max((r.start_s for r in records), default=0.0)
        if last_sent < plan_end - 1.0:
            notes.append(
                f"The load plan stopped after {n} requests, {last_sent:.0f} s into its {plan_end:.0f} s: the "
                "request cap ended it (num_prompts; in a sweep, concurrency x prompts_per_concurrency); raise it "
                "to run the whole plan."
            )
    return notes, interrupted


def _telemetry(o: RunOutcome, notes: list[str]) -> tuple[TelemetrySummary, list[TelemetrySample]]:
    """The scraped telemetry and its samples (times from the clock's start); the notes on the cost of scraping
    and on the prefix cache are added to ``notes``."""
    config, scraper = o.config, o.scraper
    if scraper is None:
        return TelemetrySummary(available=False, error="scraping was turned off"), []
    telemetry = scraper.summary()
    scrape_ms = telemetry.derived.get("scrape_ms_mean", 0.0)
    if scrape_ms > SCRAPE_NOTE_MS:
        notes.append(
            f"Each /metrics scrape took {scrape_ms:.0f} ms on average (every {config.scrape_interval_s:g} s); "
            "rendering metrics costs the server CPU, which can slow a server with few CPUs: compare with "
            "--no-scrape or a longer --scrape-interval."
        )
    samples = [s.model_copy(update={"t_s": s.wall - o.wall0}) for s in scraper.samples]
    measured_hit = telemetry.derived.get("prefix_cache_hit_rate")
    expected_hit = o.source.expected_prefix_hit_rate
    if config.prefix_len and expected_hit is not None and measured_hit is not None:
        notes.append(
            f"Prefix cache: the server found {measured_hit:.1%} of the prompt tokens cached; these prompts "
            f"should give {expected_hit:.1%} to a server that keeps every shared block"
            + (
                " (lower: blocks were evicted, or prefix caching is off)."
                if measured_hit < expected_hit - 0.05
                else "."
            )
        )
    return telemetry, samples
