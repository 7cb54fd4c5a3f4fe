"""The llama.cpp runtime: the local module command, the container's llama-server flags, the image, guards."""

from __future__ import annotations

import os

from accelbench.domain.run import EngineSettings
from accelbench.runtimes import get_runtime
from accelbench.runtimes.runtime import ServeParams


def params(**kw: object) -> ServeParams:
    base: dict[str, object] = dict(
        model="/m/SmolLM2.Q4_1.gguf", served_model_name="smol", host="127.0.0.1", port=9000
    )
    base.update(kw)
    return ServeParams(**base)  # type: ignore[arg-type]


def test_local_command() -> None:
    rt = get_runtime("llamacpp")
    argv = rt.command(params(settings=EngineSettings(max_model_len=4096, threads=3)), python="/e/bin/python")
    assert argv == [
        "/e/bin/python",
        "-m",
        "llama_cpp.server",
        "--model",
        "/m/SmolLM2.Q4_1.gguf",
        "--host",
        "127.0.0.1",
        "--port",
        "9000",
        "--n_ctx",
        "4096",
        "--model_alias",
        "smol",
        "--interrupt_requests",
        "False",
        "--n_threads",
        "3",
    ]


def test_local_threads_default_to_every_core() -> None:
    argv = get_runtime("llamacpp").command(params())
    assert argv[argv.index("--n_threads") + 1] == str(os.cpu_count())
    assert argv[argv.index("--n_ctx") + 1] == "2048"


def test_container_args_and_image() -> None:
    rt = get_runtime("llamacpp")
    assert rt.serve_args(params(settings=EngineSettings(extra_args=["--flash-attn"]))) == [
        "-m",
        "/m/SmolLM2.Q4_1.gguf",
        "--host",
        "127.0.0.1",
        "--port",
        "9000",
        "-c",
        "2048",
        "--alias",
        "smol",
        "--flash-attn",
    ]
    assert rt.default_image("0.3.36") == "ghcr.io/ggml-org/llama.cpp:server"
    assert rt.default_image("b4600") == "ghcr.io/ggml-org/llama.cpp:server-b4600"
    assert (
        rt.default_image("b4600", registry="cache.example/ghcr")
        == "cache.example/ghcr/ggml-org/llama.cpp:server-b4600"
    )
    assert rt.image("1", environ={"LLAMACPP_IMAGE": "mine:1"}) == "mine:1"
    assert rt.env(params(settings=EngineSettings(env={"A": "1"}))) == {"A": "1"}


def test_guards() -> None:
    rt = get_runtime("llamacpp")
    assert rt.validate(params()) == []
    errors = rt.validate(
        params(
            model="/m/hf-dir",
            isa_trace=True,
            settings=EngineSettings(kv_cache_space_gib=1, quantization="int8", tensor_parallel_size=2),
        )
    )
    text = " | ".join(errors)
    for word in ("GGUF", "isa_trace", "kv_cache_space_gib", "quantization", "tensor_parallel_size"):
        assert word in text
