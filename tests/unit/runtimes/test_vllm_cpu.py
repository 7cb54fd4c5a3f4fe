"""vllm-cpu: image per architecture, argv (local and container), environment, quantization, validation."""

from __future__ import annotations

import pytest

from accelbench.domain.run import EngineSettings
from accelbench.runtimes import get_runtime, runtime_for_accelerator
from accelbench.runtimes.params import params_for
from tests.support.instances import instance

RT = get_runtime("vllm-cpu")


def cpu_params(name: str = "m8i.2xlarge", **settings: object):
    kw = {"kv_cache_space_gib": 8, **settings}
    return params_for(
        model="Qwen/Qwen2.5-7B-Instruct",
        served_model_name="qwen",
        instance=instance(name),
        settings=EngineSettings(**kw),  # type: ignore[arg-type]
    )


def test_cpu_tier_defaults_to_vllm_cpu() -> None:
    assert runtime_for_accelerator("cpu") is RT


@pytest.mark.parametrize(
    ("arch", "registry", "expected"),
    [
        ("x86_64", None, "vllm/vllm-openai-cpu:v0.32.0"),
        ("arm64", None, "vllm/vllm-openai-cpu:v0.32.0-arm64"),
        (
            "arm64",
            "123.dkr.ecr.us-east-1.amazonaws.com/dockerhub/",
            "123.dkr.ecr.us-east-1.amazonaws.com/dockerhub/vllm/vllm-openai-cpu:v0.32.0-arm64",
        ),
    ],
)
def test_image_per_arch_and_registry(arch: str, registry: str | None, expected: str) -> None:
    assert RT.image("0.32.0", registry, arch, environ={}) == expected
    assert RT.image("v0.32.0", registry, arch, environ={}) == expected  # either spelling of the version


def test_image_env_override_wins() -> None:
    env = {"VLLM_CPU_IMAGE": "mirror/vllm-cpu:custom", "VLLM_IMAGE": "not/this:one"}
    assert RT.image("0.32.0", "reg", "arm64", environ=env) == "mirror/vllm-cpu:custom"


def test_cpu_version_key_is_its_own() -> None:
    assert RT.resolve_version({"vllm": "0.19.0", "vllm-cpu": "0.27.0"}) == "0.27.0"
    assert RT.resolve_version({"vllm": "0.19.0"}) == RT.default_version


def test_local_command_uses_the_api_server_module() -> None:
    p = cpu_params().model_copy(update={"host": "127.0.0.1", "port": 4321})
    argv = RT.command(p, python="/engines/vllm-cpu/bin/python")
    assert argv[:3] == ["/engines/vllm-cpu/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert "vllm" not in argv[:1]
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[argv.index("--port") + 1] == "4321"


def test_args_bf16_tp_numa_and_limits() -> None:
    p = cpu_params(max_model_len=8192, max_num_seqs=16, max_num_batched_tokens=4096)
    args = RT.serve_args(p)
    assert args[args.index("--dtype") + 1] == "bfloat16"
    assert args[args.index("--tensor-parallel-size") + 1] == "1"
    assert args[args.index("--max-model-len") + 1] == "8192"
    assert args[args.index("--max-num-seqs") + 1] == "16"
    assert args[args.index("--max-num-batched-tokens") + 1] == "4096"
    for forbidden in ("--gpu-memory-utilization", "--kv-cache-dtype", "--load-format", "--quantization"):
        assert forbidden not in args
    two_socket = RT.serve_args(cpu_params("m7i.48xlarge"))
    assert two_socket[two_socket.index("--tensor-parallel-size") + 1] == "2"


def test_fp16_request_is_still_bf16() -> None:
    args = RT.serve_args(cpu_params(quantization="fp16"))
    assert args[args.index("--dtype") + 1] == "bfloat16"
    assert args.count("--dtype") == 1


def test_env_kv_budget_exact_and_thread_bind() -> None:
    env = RT.env(cpu_params(kv_cache_space_gib=30))
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "30"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
    assert "ONEDNN_VERBOSE" not in env
    traced = cpu_params().model_copy(update={"isa_trace": True})
    assert RT.env(traced)["ONEDNN_VERBOSE"] == "1"


def test_user_env_wins_and_threads_pin_cores() -> None:
    env = RT.env(cpu_params(threads=4, env={"OMP_WAIT_POLICY": "PASSIVE"}))
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-3"
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"


@pytest.mark.parametrize("q", ["int8", "int4", "INT8"])
def test_int_quantization_maps_to_compressed_tensors(q: str) -> None:
    args = RT.serve_args(cpu_params(quantization=q))
    assert args[args.index("--quantization") + 1] == "compressed-tensors"
    assert "bitsandbytes" not in args
    assert RT.map_quantization(q, streaming=True) == []  # suppressed when streaming


def test_cpu_never_streams_weights() -> None:
    p = params_for(
        model="s3://bucket/qwen",
        served_model_name="qwen",
        instance=instance("r8g.4xlarge"),
        settings=EngineSettings(kv_cache_space_gib=30),
        model_size_gib=15.2,
    )
    assert p.stream_weights is True  # asked for ...
    args = RT.serve_args(p)
    assert "--load-format" not in args and "--model-loader-extra-config" not in args  # ... downloaded


def test_validation_messages_say_what_to_change() -> None:
    assert RT.validate(cpu_params()) == []
    errs = RT.validate(cpu_params(kv_cache_space_gib=2.5))
    assert any("set it to 2" in e for e in errs)
    unset = params_for(model="m", served_model_name="m", instance=instance("m8i.2xlarge"))
    assert RT.validate(unset) == []  # vLLM's own default budget applies
    assert "VLLM_CPU_KVCACHE_SPACE" not in RT.env(unset)
    assert any("fp8" in e and "int8" in e for e in RT.validate(cpu_params(quantization="fp8")))
    assert any("gpu_memory_utilization" in e for e in RT.validate(cpu_params(gpu_memory_utilization=0.9)))
    bad_extra = cpu_params(extra_args=["--kv-cache-dtype=fp8"])
    assert any("--kv-cache-dtype" in e for e in RT.validate(bad_extra))
    gptq = cpu_params(quantization="int4").model_copy(update={"pre_quantized": "gptq"})
    assert any("W4A8" in e for e in RT.validate(gptq))


def test_refuses_gpu_instance() -> None:
    p = params_for(
        model="m",
        served_model_name="m",
        instance=instance("g6.2xlarge"),
        settings=EngineSettings(kv_cache_space_gib=4),
    )
    assert any("serves cpu, not gpu" in e for e in RT.validate(p))
