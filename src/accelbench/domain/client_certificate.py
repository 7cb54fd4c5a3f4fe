"""Whether the load generator could keep up: what it sustained against a zero-delay loopback server at a run's
load (ClientCertificate), and the CPUs it shares with the engine (CoreOverlap)."""

from __future__ import annotations

import math

from pydantic import Field

from accelbench.domain.strict import StrictModel


class ClientCertificate(StrictModel):
    """What the load generator sustained against a zero-delay loopback server at a run's load
    (``accelbench.bench.selftest.client_self_test``): the most this client, on these cores, can measure.

    In a closed loop (``request_rate`` infinite) the client ran flat out, so the rates it reached are its ceiling
    (``capacity_* == *_per_s``). At a finite rate it only had to keep the schedule: the rates are the offered
    load, the lag says whether it kept up, and the ceiling is estimated from the CPU it spent,
    ``1e6 / process_cpu_us_per_chunk`` chunks/s for one event loop (the loopback server's CPU included, so an
    underestimate)."""

    requests_per_s: float = Field(ge=0, description="Completed requests per second.")
    chunks_per_s: float = Field(ge=0, description="Text-carrying SSE chunks parsed per second.")
    lag_p50_ms: float | None = Field(
        default=None, description="Median scheduling lag (actual minus planned send) at a finite rate, ms."
    )
    lag_p99_ms: float | None = Field(default=None, description="99th percentile scheduling lag, ms.")
    cpu_us_per_chunk: float = Field(
        ge=0, description="CPU time of the client's event-loop thread per chunk, microseconds."
    )
    process_cpu_us_per_chunk: float = Field(
        default=0.0, ge=0, description="CPU time of the whole process (client and loopback server) per chunk."
    )
    capacity_chunks_per_s: float = Field(
        default=0.0, ge=0, description="The chunk rate the client can sustain (measured or CPU-estimated)."
    )
    capacity_requests_per_s: float = Field(
        default=0.0, ge=0, description="The request rate the client can sustain at this output length."
    )
    completed: int = Field(default=0, ge=0, description="Requests completed in the measurement.")
    failed: int = Field(default=0, ge=0, description="Requests that failed (should be 0).")
    concurrency: int | None = Field(default=None, description="Requests in flight at most.")
    request_rate: float = Field(
        default=math.inf, description="Planned requests per second; inf = closed loop."
    )
    output_len: int = Field(default=0, ge=0, description="Tokens (one per chunk) per response.")
    duration_s: float = Field(default=0.0, ge=0, description="Wall time of the measurement.")
    cores: list[int] = Field(default_factory=list, description="CPUs the client was allowed to run on.")

    def headroom(self, observed_chunks_per_s: float) -> float:
        """How many times a run's chunk rate the client can sustain (inf for a run that needed none)."""
        if observed_chunks_per_s <= 0:
            return math.inf
        return self.capacity_chunks_per_s / observed_chunks_per_s

    def verdict(
        self,
        observed_chunks_per_s: float,
        observed_requests_per_s: float,
        *,
        margin: float = 3.0,
        max_lag_ms: float = 10.0,
    ) -> tuple[bool, str]:
        """(ok, one sentence): whether the client can sustain at least ``margin`` times the chunk and request
        rates the finished run needed (and, at a finite rate, kept its schedule to ``max_lag_ms`` at p99), with
        the figures; when not, by how much it was short."""
        h_chunks = self.headroom(observed_chunks_per_s)
        h_req = (
            math.inf
            if observed_requests_per_s <= 0
            else self.capacity_requests_per_s / observed_requests_per_s
        )
        where = f" on {len(self.cores)} core{'s' if len(self.cores) != 1 else ''}" if self.cores else ""
        can = (
            f"the client can sustain {self.capacity_chunks_per_s:,.0f} chunks/s and "
            f"{self.capacity_requests_per_s:,.1f} requests/s{where}"
        )
        needed = f"the {observed_chunks_per_s:,.0f} chunks/s and {observed_requests_per_s:,.1f} requests/s the run needed"
        if self.lag_p99_ms is not None and self.lag_p99_ms > max_lag_ms:
            return False, (
                f"The client could not keep its own schedule against a zero-delay server: p99 scheduling lag "
                f"{self.lag_p99_ms:,.1f} ms (p50 {self.lag_p50_ms or 0:,.1f} ms) at {self.request_rate:g} requests/s, "
                f"over {max_lag_ms:g} ms; measured latencies include the load generator's own delay."
            )
        if h_chunks >= margin and h_req >= margin:
            return (
                True,
                f"The client had headroom: {can}, {min(h_chunks, h_req):,.1f}x {needed} (>= {margin:g}x).",
            )
        if h_chunks <= h_req:
            gap = margin * observed_chunks_per_s - self.capacity_chunks_per_s
            short = f"{h_chunks:,.1f}x the chunk rate, {gap:,.0f} chunks/s short of {margin:g}x"
        else:
            gap = margin * observed_requests_per_s - self.capacity_requests_per_s
            short = f"{h_req:,.1f}x the request rate, {gap:,.1f} requests/s short of {margin:g}x"
        return False, (
            f"The client had too little headroom: {can}, only {short} {needed}; measured latencies may include "
            "the load generator's own delay."
        )


class CoreOverlap(StrictModel):
    """The CPUs the load generator may run on against those the engine is bound to."""

    client_cpus: list[int] = Field(default_factory=list)
    engine_cpus: list[int] | None = Field(default=None, description="None: the engine's binding is unknown.")
    shared: int | None = Field(
        default=None, description="CPUs in both sets; None when the engine's are unknown."
    )
    sentence: str = ""
