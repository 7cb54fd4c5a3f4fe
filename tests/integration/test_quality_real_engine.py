"""The quality probe and what a run served, against the real vLLM CPU engine and the real small model (the
session's shared server, ``vllm_endpoint``), set beside the in-repo server's fixed filler text."""

from __future__ import annotations

import time

from accelbench.bench.quality import run_probe
from accelbench.bench.quality_run import QualitySetting, measure_quality
from accelbench.bench.served_identity import record_served, sampling_of
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from accelbench.report.compare_runs import build_comparison
from tests.support.report_data import make_result, run_data
from tests.support.stream_server import StreamServer


def test_the_probe_tells_the_real_model_from_filler_and_two_runs_agree(vllm_endpoint: Endpoint) -> None:
    from accelbench.store import get_store

    store = get_store()
    runs = [
        store.create_run(kind="bench", model="smollm2", served_model=vllm_endpoint.served_model) for _ in "ab"
    ]
    t0 = time.monotonic()
    first = measure_quality(store, runs[0].id, vllm_endpoint, QualitySetting("probe"))
    probe_s = time.monotonic() - t0
    second = measure_quality(store, runs[1].id, vllm_endpoint, QualitySetting("probe"))
    with StreamServer(model="filler") as server:
        filler = run_probe(Endpoint(base_url=server.base_url, served_model="filler"))
    print(f"probe on the real engine: {first['correct']}/{first['tasks']} {first['accuracy_ci95']} in {probe_s:.1f} s; "
          f"filler {filler['correct']}/{filler['tasks']} {filler['accuracy_ci95']}; agreement {second['agreement']}")  # fmt: skip
    assert first["failed"] == 0 and first["agreement_unit"] == "tokens"  # vLLM names its tokens
    assert first["accuracy_ci95"][0] > filler["accuracy_ci95"][1]  # the intervals do not overlap
    assert second["reference_run"] == runs[0].id
    assert second["agreement"] is not None and second["agreement"] >= 0.9  # greedy: the same leading tokens
    assert probe_s < 20  # under 10% of the demo's 3.5 minutes


def test_what_the_real_engine_served_and_compare_flags_another_max_length(vllm_endpoint: Endpoint) -> None:
    from accelbench.store import get_store

    store = get_store()
    a = store.create_run(kind="bench", model="smollm2", served_model=vllm_endpoint.served_model)
    record_served(store, a.id, vllm_endpoint, sampling=sampling_of(BenchConfig(temperature=0.0)))
    served = store.get_run(a.id).extra["served"]
    assert served["max_model_len"] == {"value": 2048, "source": "/v1/models"}
    assert served["kv_cache_dtype"]["source"] == "/metrics (vllm:cache_config_info)"
    assert served["prefix_caching"]["value"] in (True, False)
    assert (
        served["config_hash"]["value"] and served["chat_template_hash"]["value"]
    )  # the model dir is readable
    assert served["engine"]["value"] == "vllm"
    assert served["speculative_decoding"] == {"value": None, "source": None}  # nobody says: unknown
    # a second run of the same server, as if it had been started with --max-model-len 1024
    b = store.create_run(kind="bench", model="smollm2", served_model=vllm_endpoint.served_model)
    shorter = {**served, "max_model_len": {"value": 1024, "source": "launch command"}}
    store.merge_run_extra(b.id, served=shorter)
    cmp = build_comparison(
        [
            run_data(store.get_run(r.id), [make_result(r.id, 128, 1, tpot=20.0, total_tps=50.0)])
            for r in (a, b)
        ]
    )
    assert cmp.like_for_like is False and cmp.pairs == []
    assert [m["field"] for m in cmp.mismatches] == ["max_model_len"]
    assert "max model length is 1,024" in cmp.mismatches[0]["text"]
