"""vllm-neuron and sglang: images, argv, environment, validation."""

from __future__ import annotations

from accelbench.domain.run import EngineSettings
from accelbench.runtimes import get_runtime, runtime_for_accelerator
from accelbench.runtimes.params import params_for
from tests.support.instances import instance

NEURON = get_runtime("vllm-neuron")
SGL = get_runtime("sglang")


def p(name: str, **settings: object):
    return params_for(
        model="Qwen/Qwen2.5-7B-Instruct",
        served_model_name="qwen",
        instance=instance(name),
        settings=EngineSettings(**settings),
    )  # type: ignore[arg-type]


def test_neuron_defaults() -> None:
    assert runtime_for_accelerator("neuron") is NEURON
    img = NEURON.image(NEURON.default_version, None, environ={})
    assert img.endswith(":" + NEURON.default_version) and "vllm-neuronx" in img
    assert NEURON.image("x", environ={"VLLM_NEURON_IMAGE": "a/b:c"}) == "a/b:c"
    cached = NEURON.image("1.0", "123.dkr.ecr.us-east-1.amazonaws.com/ecr-public", environ={})
    assert (
        cached == "123.dkr.ecr.us-east-1.amazonaws.com/ecr-public/neuron/pytorch-inference-vllm-neuronx:1.0"
    )
    args = NEURON.serve_args(p("inf2.xlarge"))
    assert args[args.index("--tensor-parallel-size") + 1] == "2"  # 1 device x 2 NeuronCores
    assert args[args.index("--max-num-seqs") + 1] == "4"  # compiled shapes are always explicit
    assert args[args.index("--max-model-len") + 1] == "4096"
    assert args[args.index("--device") + 1] == "neuron"
    assert "--gpu-memory-utilization" not in args
    assert NEURON.env(p("inf2.xlarge"))["VLLM_NEURON_FRAMEWORK"] == "neuronx-distributed-inference"
    assert NEURON.validate(p("inf2.xlarge")) == []


def test_neuron_validation() -> None:
    assert any("BF16" in e for e in NEURON.validate(p("inf2.xlarge", quantization="int8")))
    assert any(
        "exceeds the 2 NeuronCores" in e for e in NEURON.validate(p("inf2.xlarge", tensor_parallel_size=4))
    )
    assert any("serves neuron, not gpu" in e for e in NEURON.validate(p("g6.2xlarge")))
    # TP is a power of two or every NeuronCore (NxD Inference pads the heads), as the planner plans it
    assert NEURON.validate(p("inf2.48xlarge", tensor_parallel_size=24)) == []
    assert NEURON.validate(p("inf2.48xlarge", tensor_parallel_size=16)) == []
    assert any(
        "power of two or all 24" in e for e in NEURON.validate(p("inf2.48xlarge", tensor_parallel_size=12))
    )


def test_sglang_args() -> None:
    assert SGL.image("0.5.23", None, environ={}) == "lmsysorg/sglang:v0.5.23"
    assert SGL.image("0.5.23", environ={"SGLANG_IMAGE": "mine:1"}) == "mine:1"
    args = SGL.serve_args(
        p("g6.2xlarge", max_model_len=4096, kv_cache_dtype="fp8", gpu_memory_utilization=0.8)
    )
    assert SGL.command(p("g6.2xlarge"))[:3] == ["python3", "-m", "sglang.launch_server"]
    assert args[args.index("--model-path") + 1] == "Qwen/Qwen2.5-7B-Instruct"
    assert args[args.index("--attention-backend") + 1] == "triton"  # L4 is not Hopper
    assert args[args.index("--kv-cache-dtype") + 1] == "fp8_e5m2"
    assert args[args.index("--context-length") + 1] == "4096"
    assert args[args.index("--mem-fraction-static") + 1] == "0.8"
    hopper = SGL.serve_args(p("p5.48xlarge"))
    assert "--attention-backend" not in hopper
    assert hopper[hopper.index("--tp") + 1] == "8"
    own = SGL.serve_args(p("g6.2xlarge", extra_args=["--attention-backend", "flashinfer"]))
    assert own.count("--attention-backend") == 1 and own[-1] == "flashinfer"


def test_sglang_validation() -> None:
    assert SGL.validate(p("g6.2xlarge")) == []
    assert any("pre-quantized" in e for e in SGL.validate(p("g6.2xlarge", quantization="int4")))
    assert any("serves gpu" in e for e in SGL.validate(p("r8g.4xlarge")))
