"""The Runtime interface and its registry.

Runtime modules register themselves on import; the registry imports the known modules on first lookup so that
``get_runtime`` always sees every runtime.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar, Literal

from pydantic import Field

from accelbench.domain.instance_types import AcceleratorType, InstanceType
from accelbench.domain.run import EngineSettings
from accelbench.domain.strict import StrictModel
from accelbench.registry import Registry
from accelbench.runtimes.engine_args import image_ref, v_tag

RUNTIME_MODULES = ["vllm", "vllm_cpu", "vllm_neuron", "sglang", "llamacpp"]


class ServedModel(StrictModel):
    """The model an engine serves, as the runtimes and their guards need to know it."""

    model: str = Field(
        description="Model directory, GGUF file, hub id or s3:// URI as the engine will read it."
    )
    served_model_name: str = Field(
        description="Name the server answers to; the load generator uses the same."
    )
    trust_remote_code: bool = False
    model_size_gib: float | None = Field(default=None, description="Weights, GiB.")
    parameters: float | None = Field(default=None, description="Parameter count (for CPU ceilings).")
    moe: bool = Field(
        default=False,
        description="Mixture-of-experts model (the CPU ceiling for dense models does not apply).",
    )
    pre_quantized: str | None = Field(
        default=None, description="Quantization method of the checkpoint itself."
    )


class ServeParams(ServedModel):
    """Everything a runtime needs to produce a serve command, whatever the target."""

    host: str = "0.0.0.0"
    port: int = 8000
    accelerator_type: AcceleratorType = AcceleratorType.cpu
    accelerator_count: int = 0
    arch: Literal["x86_64", "arm64"] = "x86_64"
    numa_nodes: int = 1
    instance: InstanceType | None = None
    settings: EngineSettings = Field(default_factory=EngineSettings)
    stream_weights: bool = Field(
        default=False, description="Load weights with the Run:ai model streamer (s3://)."
    )
    isa_trace: bool = Field(default=False, description="oneDNN verbose trace (CPU engines).")
    hf_token_secret: str | None = Field(
        default=None, description="Name of a Kubernetes secret holding HF_TOKEN."
    )


class Runtime(ABC):
    """One serving engine. Subclasses set the class attributes and implement the abstract methods."""

    name: ClassVar[str]
    container_name: ClassVar[str] = "engine"
    accelerators: ClassVar[frozenset[AcceleratorType]]
    image_env_var: ClassVar[str | None] = None
    #: key of the runtime's version in the tool-versions table: its ``name`` unless it sets another
    tool_version_key: ClassVar[str | None] = None
    default_version: ClassVar[str]
    container_port: ClassVar[int] = 8000
    #: the engine's image repository (``vllm/vllm-openai``, or with its registry host: ``ghcr.io/...``)
    repository: ClassVar[str]
    #: the Python module that serves, started as ``python -m entry_module`` by ``command``
    entry_module: ClassVar[str]

    def default_image(self, version: str, registry: str | None = None, arch: str = "x86_64") -> str:
        """Container image for ``version`` (``repository:image_tag``), behind a pull-through ``registry``
        prefix when given."""
        return image_ref(self.repository, self.image_tag(version, arch), registry)

    def image_tag(self, version: str, arch: str = "x86_64") -> str:
        """The image tag of ``version`` on ``arch``: ``v<version>``, vLLM's and SGLang's spelling."""
        return v_tag(version)

    def image(
        self,
        version: str,
        registry: str | None = None,
        arch: str = "x86_64",
        environ: Mapping[str, str] | None = None,
    ) -> str:
        """The image to deploy: the environment override when set, else the default."""

        env = os.environ if environ is None else environ
        if self.image_env_var and env.get(self.image_env_var):
            return env[self.image_env_var]
        return self.default_image(version, registry, arch)

    def resolve_version(self, tool_versions: Mapping[str, str]) -> str:
        return tool_versions.get(self.tool_version_key or self.name) or self.default_version

    @abstractmethod
    def serve_args(self, params: ServeParams) -> list[str]:
        """Engine flags (no program name)."""

    def local_args(self, params: ServeParams) -> list[str]:
        """Flags of the server started locally: ``serve_args`` unless the local server is another program."""
        return self.serve_args(params)

    def command(self, params: ServeParams, python: str = "python3") -> list[str]:
        """Full argv: program and flags, ``python -m entry_module`` and ``local_args``. Locally ``python`` is
        the engine venv's interpreter. A runtime whose server is not a Python module overrides this."""
        return [python, "-m", self.entry_module, *self.local_args(params)]

    def env(self, params: ServeParams) -> dict[str, str]:
        """Environment variables the engine needs: the runtime's own, then the settings' ``env`` (which
        wins)."""
        return {**self.engine_env(params), **params.settings.env}

    def engine_env(self, params: ServeParams) -> dict[str, str]:
        """The variables the runtime itself sets for the engine (none unless a runtime needs some)."""
        return {}

    @abstractmethod
    def map_quantization(self, quantization: str | None, *, streaming: bool = False) -> list[str]:
        """Engine flags for a requested quantization (none, fp16, fp8, int8, int4)."""

    def validate(self, params: ServeParams) -> list[str]:
        """Reasons the parameters cannot work with this runtime (empty when fine)."""
        errors = []
        if params.accelerator_type not in self.accelerators:
            kinds = ", ".join(sorted(a.value for a in self.accelerators))
            errors.append(
                f"runtime {self.name!r} serves {kinds}, not {params.accelerator_type.value} instances"
            )
        return errors


RUNTIMES: Registry[Runtime] = Registry("runtime", [f"accelbench.runtimes.{m}" for m in RUNTIME_MODULES])


def get_runtime(name: str) -> Runtime:
    return RUNTIMES.get(name)


# The one place that decides which runtime serves an accelerator tier by default.
DEFAULT_RUNTIME = {
    AcceleratorType.gpu: "vllm",
    AcceleratorType.neuron: "vllm-neuron",
    AcceleratorType.cpu: "vllm-cpu",
}


def runtime_for_accelerator(kind: AcceleratorType | str) -> Runtime:
    return get_runtime(DEFAULT_RUNTIME[AcceleratorType(kind)])
