"""Where the client and the engine run: the CPUs this process may use against those the engine is bound to
(``engine_cpus_from_bind`` reads vLLM CPU's ``VLLM_CPU_OMP_THREADS_BIND``; ``core_overlap``), and moving the client
off the engine's cores when there are others (``isolate_client``)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable

from accelbench.domain.client_certificate import CoreOverlap


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on (all of them where affinity is not available)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def _cpu_list(text: str) -> set[int] | None:
    """``"0-3,8,10-11"`` to a set; None when malformed."""
    out: set[int] = set()
    for item in text.split(","):
        if not item.strip():
            continue
        m = _RANGE.match(item)
        if m is None:
            return None
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            return None
        out.update(range(lo, hi + 1))
    return out or None


def engine_cpus_from_bind(bind: str | None, threads: int | None, cpu_count: int) -> set[int] | None:
    """The CPUs a vLLM CPU engine's OpenMP threads run on, from ``VLLM_CPU_OMP_THREADS_BIND``.

    ``"auto"`` (vLLM binds each rank to its NUMA node's cores; together, all of them), ``"all"`` and ``"nobind"``
    (no pinning: the threads may run anywhere) mean every CPU, ``range(cpu_count)``; a CPU list (``"0-3"``,
    ``"0,2,4"``) is those CPUs; one list per rank separated by ``|`` (``"0-3|4-7"``) is their union. With no
    bind string, an explicit ``threads`` count means the first ``threads`` cores (what
    ``accelbench.runtimes.vllm_cpu`` sets for it). None when it cannot be known (no bind and no threads, or
    a malformed string)."""
    if bind is None or not bind.strip():
        if threads and threads > 0:
            return set(range(threads))
        return None
    b = bind.strip().lower()
    if b in ("auto", "all", "nobind"):
        return set(range(max(1, cpu_count)))
    out: set[int] = set()
    for rank in b.split("|"):
        cpus = _cpu_list(rank)
        if cpus is None:
            return None
        out |= cpus
    return out or None


def _count(n: int) -> str:
    return f"{n} core{'s' if n != 1 else ''}"


def core_overlap(engine_cpus: Iterable[int] | None, client_cpus: Iterable[int] | None = None) -> CoreOverlap:
    """The CPUs this process (the load generator) may run on against the engine's (None: unknown), how many
    they share, and a sentence saying what that means for the latencies. ``client_cpus`` defaults to this
    process's affinity."""
    client = set(client_cpus) if client_cpus is not None else allowed_cpus()
    if engine_cpus is None:
        return CoreOverlap(
            client_cpus=sorted(client),
            sentence=f"the engine's cores are unknown; the client may run on {_count(len(client))}: measured "
            "latencies may include contention with the load generator",
        )
    engine = set(engine_cpus)
    shared = len(client & engine)
    if shared == 0:
        sentence = (
            f"the client ({_count(len(client))}) and the engine ({_count(len(engine))}) share no core: "
            "the load generator does not compete with the engine for CPU"
        )
    else:
        sentence = (
            f"the client and the engine share {shared} of {_count(len(engine))}: measured latencies include "
            "contention with the load generator"
        )
    return CoreOverlap(
        client_cpus=sorted(client), engine_cpus=sorted(engine), shared=shared, sentence=sentence
    )


def set_process_affinity(cpus: Iterable[int]) -> None:
    """Restrict every thread of this process to ``cpus`` (``os.sched_setaffinity(0, ...)`` alone moves only the
    calling thread on Linux; the threads already running are moved one by one through ``/proc/self/task``)."""
    mask = set(cpus)
    tids: list[int] = []
    with contextlib.suppress(OSError):
        tids = [int(t) for t in os.listdir("/proc/self/task") if t.isdigit()]
    for tid in tids:
        with contextlib.suppress(OSError):  # a thread that has just ended
            os.sched_setaffinity(tid, mask)
    os.sched_setaffinity(0, mask)


def isolate_client(engine_cpus: set[int]) -> set[int] | None:
    """Move this process off the engine's cores: when its affinity has CPUs the engine does not use, restrict
    it to those (every thread, and so every thread started afterwards) and return them; else (or without
    affinity support) change nothing and return None."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    free = allowed_cpus() - set(engine_cpus)
    if not free:
        return None
    set_process_affinity(free)
    return free
