"""llama.cpp: the same GGUF file, served on CPU by llama.cpp's OpenAI-compatible server.

Two programs, one set of parameters:
- locally, ``python -m llama_cpp.server`` from llama-cpp-python (installed by ``accelbench engine install
  llamacpp``; it compiles llama.cpp for this very CPU): ``--model FILE.gguf --host --port --n_ctx
  --model_alias NAME --n_threads N``;
- in a container, the llama.cpp project's own ``llama-server`` image (``server`` tag), whose flags are the C++
  server's: ``-m FILE --host --port -c N --alias NAME -t N``.

What a benchmark must know about it: its stream sends no ``usage`` chunk even when asked
(``stream_options.include_usage``), so output tokens are counted with the model's tokenizer; it has no
``/tokenize``, no ``/metrics`` and no ``/health`` (readiness is its ``/v1/models``). Without an explicit thread
count llama-cpp-python uses half the cores, so accelbench passes one (all the machine's cores unless the settings
say otherwise) to compare fairly. llama-cpp-python serves one request at a time and, by default, *cuts off* the
stream in progress when a new request arrives (``interrupt_requests``): at any concurrency above 1 that turns
requests into failures, so accelbench turns it off and later requests queue instead, which is what the
server really delivers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from accelbench.domain.instance_types import AcceleratorType
from accelbench.runtimes.engine_args import bare_version
from accelbench.runtimes.runtime import RUNTIMES, Runtime, ServeParams

DEFAULT_CONTEXT = 2048


@dataclass(frozen=True)
class ServerFlags:
    """How one of the two servers spells the same parameters."""

    model: str
    context: str
    alias: str
    threads: str


#: the C++ ``llama-server`` of the container image
CONTAINER_FLAGS = ServerFlags(model="-m", context="-c", alias="--alias", threads="-t")
#: llama-cpp-python's ``llama_cpp.server`` module, run locally
LOCAL_FLAGS = ServerFlags(model="--model", context="--n_ctx", alias="--model_alias", threads="--n_threads")


class LlamaCpp(Runtime):
    """llama.cpp (llama-cpp-python locally, the llama.cpp server image in containers)."""

    name = "llamacpp"
    accelerators = frozenset({AcceleratorType.cpu})
    image_env_var = "LLAMACPP_IMAGE"
    # llama-cpp-python release; the container image follows the llama.cpp project's own `server` tag.
    default_version = "0.3.36"
    container_port = 8080
    repository = "ghcr.io/ggml-org/llama.cpp"
    entry_module = "llama_cpp.server"
    #: llama-cpp-python's server has no /health; its model list answers once the model is loaded
    health_path: ClassVar[str] = "/v1/models"
    #: reported with results: what this server does not provide
    capabilities: ClassVar[dict[str, bool]] = {"stream_usage": False, "tokenize": False, "metrics": False}

    def image_tag(self, version: str, arch: str = "x86_64") -> str:
        # The image carries the C++ server, versioned by llama.cpp build numbers (bNNNN), not by
        # llama-cpp-python releases: a bNNNN version pins it, anything else takes the `server` tag.
        v = bare_version(version)
        return f"server-{v}" if v.startswith("b") and v[1:].isdigit() else "server"

    def pip_spec(self, version: str) -> str:
        return f"llama-cpp-python[server]=={bare_version(version)}"

    def context(self, params: ServeParams) -> int:
        return params.settings.max_model_len or DEFAULT_CONTEXT

    def threads(self, params: ServeParams, *, local: bool) -> int | None:
        if params.settings.threads:
            return params.settings.threads
        if params.instance is not None:
            return params.instance.vcpus
        return (os.cpu_count() or 1) if local else None

    def serve_args(self, params: ServeParams) -> list[str]:
        """Flags of the container's ``llama-server`` (the C++ server)."""
        return self._args(params, CONTAINER_FLAGS, local=False)

    def local_args(self, params: ServeParams) -> list[str]:
        """Flags of llama-cpp-python's server module."""
        return self._args(params, LOCAL_FLAGS, local=True)

    def _args(self, params: ServeParams, flags: ServerFlags, *, local: bool) -> list[str]:
        args = [
            flags.model,
            params.model,
            "--host",
            params.host,
            "--port",
            str(params.port),
            flags.context,
            str(self.context(params)),
            flags.alias,
            params.served_model_name,
        ]
        if local:
            # queue concurrent requests instead of cutting off the one being streamed
            args += ["--interrupt_requests", "False"]
        threads = self.threads(params, local=local)
        if threads:
            args += [flags.threads, str(threads)]
        return [*args, *params.settings.extra_args]

    def map_quantization(self, quantization: str | None, *, streaming: bool = False) -> list[str]:
        # The quantization is the GGUF file's own (Q4_1, Q8_0...): there is no flag to change it.
        return []

    def validate(self, params: ServeParams) -> list[str]:
        errors = super().validate(params)
        s = params.settings
        if not params.model.lower().endswith(".gguf"):
            errors.append(
                f"llama.cpp serves GGUF files; {params.model!r} is not one "
                "(`accelbench model prepare` keeps the GGUF file of a prepared model)"
            )
        if s.quantization and s.quantization not in ("none", "gguf"):
            errors.append(
                f"quantization {s.quantization!r} cannot be applied by llama.cpp: the GGUF file's own "
                "quantization is what runs; prepare a GGUF quantized as you want"
            )
        if s.kv_cache_space_gib is not None:
            errors.append(
                "kv_cache_space_gib is a vLLM CPU setting; llama.cpp sizes its cache from max_model_len"
            )
        if s.tensor_parallel_size and s.tensor_parallel_size > 1:
            errors.append("tensor_parallel_size does not apply to llama.cpp on CPU: remove it")
        if s.gpu_memory_utilization is not None or s.kv_cache_dtype:
            errors.append("gpu_memory_utilization / kv_cache_dtype do not apply to llama.cpp on CPU")
        if params.isa_trace:
            errors.append(
                "isa_trace reads oneDNN's trace, which only vLLM CPU produces; llama.cpp uses its own kernels"
            )
        return errors


RUNTIMES.add("llamacpp", LlamaCpp())
