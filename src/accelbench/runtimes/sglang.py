"""SGLang on NVIDIA GPUs (image ``lmsysorg/sglang``).

On GPUs older than Hopper the triton attention backend is chosen: SGLang's default there (FlashInfer)
compiles kernels just in time with nvcc, which the runtime image does not always carry, while the triton
kernels work everywhere. Hopper keeps SGLang's own default (FlashAttention 3).
"""

from __future__ import annotations

from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.quant import runtime_quantization as normalize_quantization
from accelbench.runtimes.engine_args import (
    DTYPE_FLAGS,
    flag_present,
    gpu_tensor_parallel,
    server_args,
    tensor_parallel_error,
)
from accelbench.runtimes.runtime import RUNTIMES, Runtime, ServeParams
from accelbench.runtimes.vllm import QUANTIZATIONS

HOPPER = ("h100", "h200", "h800", "h20", "gh200")


def is_hopper(params: ServeParams) -> bool:
    name = (params.instance.accelerator_name if params.instance else "").lower()
    return any(name.startswith(h) for h in HOPPER)


class SGLang(Runtime):
    name = "sglang"
    accelerators = frozenset({AcceleratorType.gpu})
    image_env_var = "SGLANG_IMAGE"
    default_version = "0.5.23"
    repository = "lmsysorg/sglang"
    entry_module = "sglang.launch_server"

    def tensor_parallel(self, params: ServeParams) -> int:
        return gpu_tensor_parallel(params)

    def serve_args(self, params: ServeParams) -> list[str]:
        s = params.settings
        args = server_args(
            params, model_flag="--model-path", tp_flag="--tp", tensor_parallel=self.tensor_parallel(params)
        )
        if s.max_model_len:
            args += ["--context-length", str(s.max_model_len)]
        if s.max_num_seqs:
            args += ["--max-running-requests", str(s.max_num_seqs)]
        if s.max_num_batched_tokens:
            args += ["--chunked-prefill-size", str(s.max_num_batched_tokens)]
        if s.gpu_memory_utilization:
            args += ["--mem-fraction-static", f"{s.gpu_memory_utilization:g}"]
        if s.kv_cache_dtype and s.kv_cache_dtype.lower() != "auto":
            kv = s.kv_cache_dtype.lower()
            # SGLang names the FP8 variant; e5m2 needs no scaling factors in the checkpoint
            args += ["--kv-cache-dtype", "fp8_e5m2" if kv == "fp8" else kv]
        if not normalize_quantization(params.pre_quantized):
            args += self.map_quantization(s.quantization, streaming=params.stream_weights)
        if not is_hopper(params) and not flag_present(s.extra_args, "--attention-backend"):
            args += ["--attention-backend", "triton"]
        args += s.extra_args
        return args

    def map_quantization(self, quantization: str | None, *, streaming: bool = False) -> list[str]:
        # int8/int4 only from pre-quantized checkpoints (refused otherwise by validate())
        return list(DTYPE_FLAGS.get(normalize_quantization(quantization) or "", []))

    def validate(self, params: ServeParams) -> list[str]:
        errors = super().validate(params)
        q = normalize_quantization(params.settings.quantization)
        if q is not None and q not in QUANTIZATIONS:
            errors.append(f"quantization {q!r} is not one of {', '.join(QUANTIZATIONS)}")
        if q in ("int8", "int4") and not normalize_quantization(params.pre_quantized):
            errors.append(
                f"SGLang serves {q} only from a pre-quantized checkpoint (AWQ, GPTQ, W8A8): choose one, "
                "or use the vllm runtime, which quantizes with bitsandbytes on load"
            )
        if params.stream_weights:
            errors.append(
                "weight streaming (s3://) is only wired for vLLM; use the vllm runtime or a hub model id"
            )
        too_many = tensor_parallel_error(params, self.tensor_parallel(params), "GPU(s)")
        if too_many:
            errors.append(too_many)
        return errors


RUNTIMES.add("sglang", SGLang())
