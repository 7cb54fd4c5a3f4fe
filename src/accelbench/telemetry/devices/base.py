"""The collector interface every device source implements.

A collector is built without raising: a source that is absent (no library, no device, no file, an endpoint that
does not answer) leaves ``available`` False and says why in ``missing``, one sentence per absent part. A
source that is present but partial (a CPU without RAPL) is available and still says what it lacks.
``sample(t_s)`` reads the source once (blocking reads; the monitor calls it from its own thread) and returns
one ``DeviceSample`` per device; a read that fails gives no samples and a note, never an exception.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

from accelbench.domain.device import DeviceSample


class DeviceCollector(ABC):
    """One device source. ``name`` is what ``DeviceTelemetry.sources`` records."""

    name: str = "device"

    def __init__(self) -> None:
        self.available = False
        #: what was read, e.g. "cpu:/proc/stat", "nvml" (several for a source with parts)
        self.sources: list[str] = []
        self.missing: list[str] = []
        #: problems met while sampling (first of each kind), reported with ``missing`` at the end
        self.errors: list[str] = []

    @abstractmethod
    def sample(self, t_s: float | None = None) -> list[DeviceSample]:
        """Read every device once; ``t_s`` is the sample's time (default: ``time.perf_counter()``)."""

    def close(self) -> None:  # noqa: B027 - optional: most sources hold nothing
        """Release what the collector holds (a library handle, a subprocess)."""

    def _note(self, message: str) -> None:
        if message not in self.errors:
            self.errors.append(message)

    @staticmethod
    def _now(t_s: float | None) -> float:
        return time.perf_counter() if t_s is None else t_s


__all__ = ["DeviceCollector"]
