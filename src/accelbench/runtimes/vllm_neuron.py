"""vLLM on AWS Neuron (Inferentia2, Trainium) through NeuronX Distributed Inference.

Neuron compiles the model for fixed shapes before serving: the batch size (``--max-num-seqs``) and the
sequence length (``--max-model-len``) are baked into the compiled graph, so both are always passed (the
planner's values, else small safe defaults), and start-up includes compilation (the manifests give Neuron a
much longer start-up allowance). Weights are served in BF16; the image does not ship the Run:ai streamer.
"""

from __future__ import annotations

from accelbench.domain.instance_types import AcceleratorType
from accelbench.domain.quant import runtime_quantization as normalize_quantization
from accelbench.runtimes.runtime import RUNTIMES, ServeParams
from accelbench.runtimes.vllm import GPU_ONLY_FLAGS, VllmFamily

#: NeuronCores per device, by the catalog's accelerator name (used when the plan gives no TP)
NEURON_CORES_PER_DEVICE = {"inferentia2": 2, "trainium": 2, "trainium1": 2, "trainium2": 8}

DEFAULT_MAX_NUM_SEQS = 4
DEFAULT_MAX_MODEL_LEN = 4096


def neuron_cores(params: ServeParams) -> int:
    name = (params.instance.accelerator_name if params.instance else "").lower()
    per_device = NEURON_CORES_PER_DEVICE.get(name, 2)
    return max(1, params.accelerator_count) * per_device


class VllmNeuron(VllmFamily):
    """vLLM with the Neuron platform (AWS Deep Learning Container for vLLM on Neuron)."""

    name = "vllm-neuron"
    accelerators = frozenset({AcceleratorType.neuron})
    image_env_var = "VLLM_NEURON_IMAGE"
    # The DLC tag names the vLLM version, the Python and the Neuron SDK together, so the whole tag is the
    # tool version.
    default_version = "0.9.1-neuronx-py310-sdk2.25.0-ubuntu22.04"
    repository = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx"
    forbidden_flags = GPU_ONLY_FLAGS

    def image_tag(self, version: str, arch: str = "x86_64") -> str:
        return version.strip()  # the whole DLC tag is the version

    def tensor_parallel(self, params: ServeParams) -> int:
        return params.settings.tensor_parallel_size or neuron_cores(params)

    def device_args(self, params: ServeParams) -> list[str]:
        return ["--device", "neuron"]

    def limit_args(self, params: ServeParams) -> list[str]:
        s = params.settings
        max_len = s.max_model_len or DEFAULT_MAX_MODEL_LEN
        args = [
            "--max-model-len",
            str(max_len),
            "--max-num-seqs",
            str(s.max_num_seqs or DEFAULT_MAX_NUM_SEQS),
        ]
        # no --block-size: the Neuron platform sets the block to the whole context itself, and vLLM's
        # argument parser only accepts small block sizes
        if s.max_num_batched_tokens:
            args += ["--max-num-batched-tokens", str(s.max_num_batched_tokens)]
        return args

    def map_quantization(self, quantization: str | None, *, streaming: bool = False) -> list[str]:
        return []  # BF16 only; anything else is refused by validate()

    def engine_env(self, params: ServeParams) -> dict[str, str]:
        return {
            "VLLM_NEURON_FRAMEWORK": "neuronx-distributed-inference",
            # compiled graphs go to the pod's cache volume; a persistent volume there skips recompilation
            "NEURON_COMPILED_ARTIFACTS": "/cache/neuron-compiled",
        }

    def validate(self, params: ServeParams) -> list[str]:
        errors = super().validate(params)
        q = normalize_quantization(params.settings.quantization)
        if q not in (None, "bf16"):
            errors.append(
                f"quantization {q} is not offered on Neuron here: Neuron runs serve BF16; "
                "remove quantization or choose a GPU instance"
            )
        tp = self.tensor_parallel(params)
        cores = neuron_cores(params)
        if tp > cores:
            errors.append(f"tensor_parallel_size {tp} exceeds the {cores} NeuronCores; set it to {cores}")
        if tp & (tp - 1) and tp != cores:
            # NxD Inference pads attention heads to a multiple of TP: a power of two, or every NeuronCore
            errors.append(
                f"tensor_parallel_size {tp} must be a power of two or all {cores} NeuronCores on Neuron"
            )
        return errors


RUNTIMES.add("vllm-neuron", VllmNeuron())
