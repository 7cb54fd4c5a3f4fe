"""What a run served: read from /v1/models, /metrics info gauges, the launch command and the model files."""

from __future__ import annotations

import json
from pathlib import Path

from accelbench.bench.served_identity import (
    FIELDS,
    from_launch,
    from_metrics_text,
    from_model_dir,
    from_models_listing,
    record_served,
    sampling_of,
    served_identity,
    served_value,
)
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import BenchConfig
from tests.support.stream_server import StreamServer

METRICS = (
    "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
    "# TYPE vllm:cache_config_info gauge\n"
    'vllm:cache_config_info{block_size="16",cache_dtype="fp8_e4m3",enable_prefix_caching="False",'
    'engine="0",gpu_memory_utilization="0.9"} 1.0\n'
    'vllm:num_requests_running{engine="0",model_name="m"} 0.0\n'
)


def test_models_listing_and_metrics() -> None:
    listing = {"data": [{"id": "other"}, {"id": "m", "root": "/models/m", "max_model_len": 4096}]}
    assert from_models_listing(listing, "m") == {
        "served_model": "m",
        "model_root": "/models/m",
        "max_model_len": 4096,
    }
    assert from_models_listing(listing, "absent") == {}
    assert from_metrics_text(METRICS) == {"kv_cache_dtype": "fp8_e4m3", "prefix_caching": False}
    assert from_metrics_text("vllm:spec_decode_num_drafts_total 3\n") == {"speculative_decoding": "on"}


def test_launch_command() -> None:
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--dtype", "bfloat16",
            "--max-model-len=2048", "--kv-cache-dtype", "auto", "--no-enable-prefix-caching",
            "--enable-chunked-prefill", "--quantization", "fp8"]  # fmt: skip
    assert from_launch(argv) == {
        "weights_dtype": "bf16",
        "max_model_len": 2048,
        "kv_cache_dtype": "auto",
        "prefix_caching": False,
        "chunked_prefill": True,
        "quantization": "fp8",
    }
    assert from_launch(["python", "-m", "llama_cpp.server", "--n_ctx", "4096"]) == {"max_model_len": 4096}


def test_model_dir_hashes(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "awq"}}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    first = from_model_dir(str(tmp_path))
    assert first["quantization"] == "awq" and len(first["config_hash"]) == 16
    assert set(first) == {"config_hash", "quantization", "tokenizer_hash", "chat_template_hash"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ other }}"}))
    second = from_model_dir(str(tmp_path))
    assert second["chat_template_hash"] != first["chat_template_hash"]
    assert second["config_hash"] == first["config_hash"]
    assert from_model_dir(str(tmp_path / "missing")) == {}


def test_served_identity_names_every_source_and_leaves_unknowns_unknown(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with StreamServer(model="m", model_root=str(tmp_path)) as server:
        endpoint = Endpoint(base_url=server.base_url, served_model="m")
        served = served_identity(
            endpoint,
            launch="python -m vllm.entrypoints.openai.api_server --dtype float16 --max-model-len 1024",
            sampling=sampling_of(BenchConfig(temperature=0.0, output_len=32)),
            engine={"name": "vllm", "version": "0.32.0"},
        )
    assert set(served) == set(FIELDS)
    assert served["model_root"] == {"value": str(tmp_path), "source": "/v1/models"}
    assert served["weights_dtype"] == {"value": "fp16", "source": "launch command"}
    assert served["max_model_len"]["source"] in ("/v1/models", "launch command")
    assert served["config_hash"]["source"].startswith("model files")
    assert served["engine_version"] == {"value": "0.32.0", "source": "engine probe"}
    assert served_value(served, "sampling") == {"api": "chat", "max_tokens": 32, "temperature": 0.0,
                                                "ignore_eos": True}  # fmt: skip
    assert served["speculative_decoding"] == {"value": None, "source": None}  # nobody said: unknown
    assert served["quantization"] == {"value": None, "source": None}


def test_record_served_reads_the_deployment_command() -> None:
    from accelbench.store import get_store

    store = get_store()
    run = store.create_run(kind="run", served_model="m", engine="vllm-cpu", engine_version="0.32.0")
    store.merge_run_extra(run.id, deployment={"command": ["python", "-m", "x", "--max-model-len", "512"]})
    record_served(store, run.id, None, sampling={"api": "chat"})
    served = store.get_run(run.id).extra["served"]
    assert served["max_model_len"] == {"value": 512, "source": "launch command"}
    assert served["engine"] == {"value": "vllm-cpu", "source": "engine probe"}
    assert served["served_model"] == {"value": "m", "source": "client"}
