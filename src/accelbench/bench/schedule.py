"""When each request is due: send times computed up front from the seed, so a run never drifts.

The arrival process is the one ``vllm bench serve`` uses: gaps drawn from a gamma distribution with shape
``burstiness`` and mean ``1 / request_rate`` (burstiness 1 is a Poisson process; below 1 burstier, above 1 more
even; infinite burstiness gives constant gaps), cumulated, then scaled so the last request is due at
``num_prompts / request_rate`` (vLLM does this so throughput does not move with the seed). An infinite rate makes
every request due at once. Schedules are registered by name (``SCHEDULES``) so other arrival processes can be
added without touching the runner.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from accelbench.registry import Registry

ScheduleFn = Callable[[int, float, float, int], list[float]]
SCHEDULES: Registry[ScheduleFn] = Registry("load schedule")


@SCHEDULES.register("gamma")
def gamma_schedule(n: int, request_rate: float, burstiness: float, seed: int) -> list[float]:
    """Offsets in seconds from the benchmark start at which requests 0..n-1 are due."""
    if n <= 0:
        return []
    if math.isinf(request_rate):
        return [0.0] * n
    if request_rate <= 0 or burstiness <= 0:
        raise ValueError("request_rate and burstiness must be positive")
    if math.isinf(burstiness):
        gaps = np.full(n, 1.0 / request_rate)
    else:
        rng = np.random.default_rng(seed)
        gaps = rng.gamma(shape=burstiness, scale=1.0 / (request_rate * burstiness), size=n)
    times = np.cumsum(gaps)
    if times[-1] > 0:
        times *= (n / request_rate) / times[-1]
    return [float(t) for t in times]


def send_times(
    n: int, request_rate: float, burstiness: float = 1.0, seed: int = 0, *, kind: str = "gamma"
) -> list[float]:
    """Planned send offsets (seconds from the start) of ``n`` requests."""
    return SCHEDULES.get(kind)(n, request_rate, burstiness, seed)
