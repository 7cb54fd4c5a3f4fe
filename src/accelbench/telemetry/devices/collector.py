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

import httpx

from accelbench.domain.device import DeviceSample
from accelbench.redact import redact_url


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


class ExporterCollector(DeviceCollector):
    """A Prometheus exporter read over HTTP (a cluster's DCGM or neuron-monitor exporter): probed once when
    built (it must answer and carry one of ``markers``), then scraped and parsed by ``parse`` at every sample."""

    #: the source's name in messages, e.g. "DCGM"
    label = ""
    #: series names one of which an answering exporter of this kind carries
    markers: tuple[str, ...] = ()
    #: what the markers are, for the message when none is there
    carries = ""

    def __init__(self, url: str, *, timeout_s: float = 2.0, client: httpx.Client | None = None) -> None:
        super().__init__()
        self.url = url
        self._client = client or httpx.Client(timeout=timeout_s)
        shown = redact_url(url)
        try:
            first = self._client.get(url)
            first.raise_for_status()
        except Exception as exc:
            self.missing.append(
                f"{self.label}: the exporter at {shown} did not answer ({type(exc).__name__}: {exc})"
            )
            return
        if not any(m in first.text for m in self.markers):
            self.missing.append(f"{self.label}: {shown} answers but carries no {self.carries} series")
            return
        self.available = True
        self.sources.append(f"{self.name}:{shown}")

    @abstractmethod
    def parse(self, text: str, t_s: float) -> list[DeviceSample]: ...

    def sample(self, t_s: float | None = None) -> list[DeviceSample]:
        if not self.available:
            return []
        t = self._now(t_s)
        try:
            r = self._client.get(self.url)
            r.raise_for_status()
            return self.parse(r.text, t)
        except Exception as exc:
            self._note(f"{self.label}: a scrape of {redact_url(self.url)} failed ({type(exc).__name__})")
            return []

    def close(self) -> None:
        self._client.close()
