"""Pure helpers of the service: validation messages, secret masking, JSON safety, key format and hashing,
and what the pages show (CPU shown as "CPU", instance labels, progress lines)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from accelbench.api.auth import hash_api_key, key_prefix, new_api_key, verify_api_key
from accelbench.api.errors import describe_validation_errors
from accelbench.api.responses import SafeJSONResponse, finite
from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunSpec, RunStatus
from accelbench.redact import MASK, redact
from accelbench.web.views import accelerator_label, instance_label, progress_text, to_json


def errors_of(data: dict) -> list:
    with pytest.raises(ValidationError) as exc:
        RunSpec.model_validate(data)
    return exc.value.errors()


def test_validation_messages_say_what_to_change() -> None:
    msg, fields = describe_validation_errors(
        [{"loc": ("body", "sweep", "concurency"), "msg": "Extra inputs are not permitted", "type": "extra_forbidden",
          "input": [1]},
         {"loc": ("body", "model"), "msg": "Field required", "type": "missing", "input": {}},
         {"loc": ("query", "status", 0), "msg": "Input should be 'pending'", "type": "enum", "input": "done"},
         {"loc": ("query", "limit"), "msg": "Input should be greater than or equal to 1", "type": "greater_than_equal",
          "input": "0"}]
    )  # fmt: skip
    assert "body 'sweep.concurency': unknown field; remove it or check its spelling" in msg
    assert "body 'model': required; add it" in msg
    assert "query parameter 'status' (value 1): Input should be 'pending' (got 'done')" in msg
    assert "query parameter 'limit': Input should be greater than or equal to 1 (got '0')" in msg
    assert [f["type"] for f in fields] == ["extra_forbidden", "missing", "enum", "greater_than_equal"]


def test_validation_messages_never_echo_secrets_or_objects() -> None:
    secret = "hf_abcdefghijklmnop"
    msg, _ = describe_validation_errors(
        [{"loc": ("body", "hf_token"), "msg": "Input should be a valid string", "type": "string_type", "input": 123456},
         {"loc": ("body",), "msg": "Value error, model must not be empty", "type": "value_error",
          "input": {"model": " ", "hf_token": secret}}]
    )  # fmt: skip
    assert "123456" not in msg and secret not in msg
    assert "model must not be empty" in msg
    assert errors_of({"model": "m", "bogus": 1})  # the real RunSpec produces these shapes


def test_redact_masks_secret_names_only() -> None:
    data = {"env": {"HF_TOKEN": "x", "OMP_NUM_THREADS": "2"}, "api_key": "k", "max_num_batched_tokens": 8192,
            "password": "", "nested": [{"authorization": "Bearer y"}], "tokenizer": "dir"}  # fmt: skip
    out = redact(data)
    assert out["env"] == {"HF_TOKEN": MASK, "OMP_NUM_THREADS": "2"}
    assert out["api_key"] == MASK and out["nested"][0]["authorization"] == MASK
    assert out["max_num_batched_tokens"] == 8192 and out["tokenizer"] == "dir" and out["password"] == ""


def test_json_responses_survive_infinity() -> None:
    body = SafeJSONResponse({"rate": math.inf, "x": [math.nan, -math.inf, 1.5]}).body
    assert json.loads(body) == {"rate": "Infinity", "x": ["NaN", "-Infinity", 1.5]}
    assert finite({"a": (1.0, math.inf)}) == {"a": [1.0, "Infinity"]}


def test_script_json_cannot_close_its_script_tag() -> None:
    text = str(to_json({"label": "</script><script>alert(1)</script>&"}))
    assert "</script>" not in text and "<" not in text and "&" not in text
    assert json.loads(text) == {"label": "</script><script>alert(1)</script>&"}


def test_api_key_format_and_hash() -> None:
    key = new_api_key()
    prefix = key_prefix(key)
    assert prefix is not None and len(prefix) == 12 and key.startswith(prefix + "_")
    assert key_prefix("abk_short") is None and key_prefix("Bearer x") is None
    stored = hash_api_key(key)
    assert verify_api_key(key, stored) and not verify_api_key(new_api_key(), stored)
    assert not verify_api_key(key, "bcrypt$whatever") and not verify_api_key(key, "garbage")


def _run(**kw) -> RunInfo:
    return RunInfo(id="r", kind="run", status=RunStatus.completed, created_at=datetime.now(UTC), **kw)


def test_accelerator_label() -> None:
    assert accelerator_label(_run(accelerator_type="cpu", accelerator_name="Graviton4")) == "CPU"
    assert accelerator_label(_run(target="local")) == "CPU"
    assert (
        accelerator_label(_run(accelerator_type="gpu", accelerator_name="L4", accelerator_count=1))
        == "1 x L4"
    )
    assert accelerator_label(_run(accelerator_type="neuron")) == "Neuron"


def test_instance_labels_show_cpu_size() -> None:
    cpu = InstanceType(name="m8i.2xlarge", family="m8i", vcpus=8, memory_gib=32, arch="x86_64",
                       accelerator_type=AcceleratorType.cpu, accelerator_name="Xeon-GNR",
                       cpu_generation="Granite Rapids")  # fmt: skip
    assert instance_label(cpu) == "m8i.2xlarge — 8 vCPU, 32 GiB, Granite Rapids"
    gpu = InstanceType(name="g6.12xlarge", family="g6", vcpus=48, memory_gib=192, arch="x86_64",
                       accelerator_type=AcceleratorType.gpu, accelerator_name="L4", accelerator_count=4,
                       accelerator_memory_gib=24)  # fmt: skip
    assert instance_label(gpu) == "g6.12xlarge — 4 x L4 (96 GiB)"


def test_progress_text_is_the_phase_in_words_never_the_raw_progress() -> None:
    """A list's one line of a run in flight (web/run_progress.py): the phase in words, then the time."""

    def run(status: RunStatus, progress: dict) -> RunInfo:
        return RunInfo(id="r", kind="run", status=status, created_at=datetime.now(UTC), progress=progress)

    assert progress_text(run(RunStatus.completed, {"phase": "measured"})) == ""
    line = progress_text(run(RunStatus.deploying, {"phase": "deploying", "detail": "model load failure"}))
    assert line.startswith("Starting the engine · running for ") and "failure" not in line
    busy = {
        "phase": "measuring",
        "cells_done": 3,
        "cells_total": 8,
        "current": {"input_len": 512, "concurrency": 4},
    }
    assert progress_text(run(RunStatus.benchmarking, busy)).startswith(
        "Benchmarking cell 4 of 8 (input 512, concurrency 4) · running for "
    )
