"""vllm (GPU): memory utilisation, FP8 KV, quantization, the sampler fallback and the Run:ai streamer."""

from __future__ import annotations

import json

import pytest

from accelbench.domain.run import EngineSettings
from accelbench.runtimes import get_runtime, runtime_for_accelerator
from accelbench.runtimes.params import params_for
from accelbench.runtimes.vllm import streamer_concurrency, streamer_memory_limit_bytes
from tests.support.instances import instance

RT = get_runtime("vllm")
GIB = 1024**3


def gpu_params(
    name: str = "g6.2xlarge",
    model: str = "Qwen/Qwen2.5-7B-Instruct",
    size: float | None = 15.2,
    **settings: object,
):
    return params_for(
        model=model,
        served_model_name="qwen",
        instance=instance(name),
        settings=EngineSettings(**settings),  # type: ignore[arg-type]
        model_size_gib=size,
    )


def streamer_config(args: list[str]) -> dict[str, object]:
    assert args[args.index("--load-format") + 1] == "runai_streamer"
    return json.loads(args[args.index("--model-loader-extra-config") + 1])


def test_gpu_defaults() -> None:
    assert runtime_for_accelerator("gpu") is RT
    assert RT.image("0.32.0", None, environ={}) == "vllm/vllm-openai:v0.32.0"
    assert RT.image("0.32.0", "reg.example/hub", environ={}) == "reg.example/hub/vllm/vllm-openai:v0.32.0"
    assert RT.image("0.32.0", environ={"VLLM_IMAGE": "x/y:z"}) == "x/y:z"
    args = RT.serve_args(gpu_params())
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.9"
    assert args[args.index("--tensor-parallel-size") + 1] == "1"
    assert "--dtype" not in args and "--kv-cache-dtype" not in args
    assert RT.command(gpu_params())[:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]


def test_sampler_fallback_env() -> None:
    assert RT.env(gpu_params())["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    # an image that ships nvcc can turn FlashInfer's sampler back on
    assert RT.env(gpu_params(env={"VLLM_USE_FLASHINFER_SAMPLER": "1"}))["VLLM_USE_FLASHINFER_SAMPLER"] == "1"


def test_fp8_kv_and_utilisation_pass_through() -> None:
    args = RT.serve_args(gpu_params("p5.48xlarge", kv_cache_dtype="fp8", gpu_memory_utilization=0.85))
    assert args[args.index("--kv-cache-dtype") + 1] == "fp8"
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.85"
    assert args[args.index("--tensor-parallel-size") + 1] == "8"


@pytest.mark.parametrize(
    ("q", "flags"),
    [
        ("fp16", ["--dtype", "float16"]),
        ("fp8", ["--quantization", "fp8"]),
        ("int8", ["--quantization", "bitsandbytes"]),
        ("int4", ["--quantization", "bitsandbytes"]),
        ("none", []),
        (None, []),
    ],
)
def test_quantization_mapping(q: str | None, flags: list[str]) -> None:
    assert RT.map_quantization(q) == flags


def test_prequantized_checkpoint_is_not_overridden() -> None:
    p = gpu_params(quantization="int4").model_copy(update={"pre_quantized": "awq"})
    assert "--quantization" not in RT.serve_args(p)


def test_streamer_single_gpu() -> None:
    args = RT.serve_args(gpu_params(model="s3://models/qwen7b", size=15.2))
    cfg = streamer_config(args)
    assert cfg["concurrency"] == 4  # ceil(15.2 / 4)
    assert "distributed" not in cfg  # one rank
    assert cfg["memory_limit"] == int(max(1.0, 0.15 * 15.2) * GIB)


def test_streamer_multi_gpu_distributed_and_caps() -> None:
    cfg = streamer_config(RT.serve_args(gpu_params("p5.48xlarge", model="s3://m/llama405b", size=760)))
    assert cfg["distributed"] is True
    assert cfg["concurrency"] == 64  # ceil(760/4)=190, capped at 64 on >= 50 Gbps
    cfg = streamer_config(RT.serve_args(gpu_params("g6.12xlarge", model="s3://m/llama70b", size=140)))
    assert cfg["concurrency"] == 32  # 40 Gbps: capped at 32
    assert cfg["distributed"] is True
    explicit = streamer_config(
        RT.serve_args(
            gpu_params(model="s3://m/x", size=140, streamer_concurrency=7, streamer_memory_limit_gib=2)
        )
    )
    assert explicit["concurrency"] == 7 and explicit["memory_limit"] == 2 * GIB


def test_streamer_helpers() -> None:
    assert streamer_concurrency(3.9, 10) == 1
    assert streamer_concurrency(4.1, 10) == 2
    assert streamer_concurrency(1000, 49.9) == 32
    assert streamer_concurrency(1000, 50) == 64
    assert streamer_concurrency(1000, 100, explicit=3) == 3
    assert streamer_memory_limit_bytes(None) == GIB


def test_bitsandbytes_disables_streaming() -> None:
    args = RT.serve_args(gpu_params(model="s3://m/q", quantization="int8"))
    assert "--load-format" not in args
    assert args[args.index("--quantization") + 1] == "bitsandbytes"


def test_validate_tp_above_gpus() -> None:
    errs = RT.validate(gpu_params(tensor_parallel_size=2))
    assert any("exceeds the 1 GPU" in e for e in errs)
    assert RT.validate(gpu_params()) == []
    cpu = params_for(model="m", served_model_name="m", instance=instance("m8i.2xlarge"))
    assert any("serves gpu, not cpu" in e for e in RT.validate(cpu))
