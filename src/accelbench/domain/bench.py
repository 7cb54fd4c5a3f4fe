"""The types of the measurement engine, by idea: what to send (``domain/load.py``: ``LoadSettings``,
``BenchConfig``), where (``domain/endpoint.py``), what happened to each request (``domain/request_record.py``),
whether the client kept up (``domain/client_certificate.py``) and the result (``domain/bench_summary.py``).

This module only names them again for the many modules that import them from here; new code imports from the
module that defines a type.
"""

from __future__ import annotations

from accelbench.domain.bench_summary import (
    ITL_COUNTING,
    BenchmarkSummary,
    MetricStats,
    PromptTokenCheck,
    StageMetrics,
    SummaryMetrics,
    TelemetrySample,
    TelemetrySummary,
    TurnMetrics,
)
from accelbench.domain.client_certificate import ClientCertificate, CoreOverlap
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import (
    BenchConfig,
    DatasetKind,
    EndpointKind,
    GoodputSLO,
    LengthDist,
    LoadSettings,
    LoadStage,
    in_ramp,
)
from accelbench.domain.request_record import RequestRecord

__all__ = [
    "ITL_COUNTING",
    "BenchConfig",
    "BenchmarkSummary",
    "ClientCertificate",
    "CoreOverlap",
    "DatasetKind",
    "Endpoint",
    "EndpointKind",
    "GoodputSLO",
    "LengthDist",
    "LoadSettings",
    "LoadStage",
    "MetricStats",
    "PromptTokenCheck",
    "RequestRecord",
    "StageMetrics",
    "SummaryMetrics",
    "TelemetrySample",
    "TelemetrySummary",
    "TurnMetrics",
    "in_ramp",
]
