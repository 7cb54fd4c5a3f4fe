"""Helpers shared by the runtime modules: image references, version spelling and common flag building.

Kept apart from ``runtime.py`` (the interface) so runtimes can share behaviour without widening the interface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the Runtime interface's module imports this one
    from accelbench.runtimes.runtime import ServeParams

#: quantization -> the flags vLLM and SGLang both take for it (the same spelling in either server)
DTYPE_FLAGS: dict[str, list[str]] = {
    "fp16": ["--dtype", "float16"],
    "bf16": ["--dtype", "bfloat16"],
    "fp8": ["--quantization", "fp8"],
}


def bare_version(version: str) -> str:
    """``v0.32.0`` -> ``0.32.0``: the spelling pip and the tool-versions table use."""
    version = version.strip()
    return version[1:] if version[:1] in ("v", "V") and version[1:2].isdigit() else version


def v_tag(version: str) -> str:
    """``0.32.0`` -> ``v0.32.0``: the spelling of vLLM and SGLang image tags."""
    bare = bare_version(version)
    return f"v{bare}" if bare[:1].isdigit() else bare


def with_registry(repository: str, registry: str | None) -> str:
    """Put a pull-through cache prefix in front of an image repository.

    The prefix is used verbatim (``123456789012.dkr.ecr.us-east-1.amazonaws.com/dockerhub``, or a Harbor
    proxy project), unlike the seed platform which always appended ``/dockerhub``: a verbatim prefix works
    with any cache layout, and the ECR layout is just one value of it.
    """
    if not registry:
        return repository
    return f"{registry.strip().rstrip('/')}/{repository}"


def image_ref(repository: str, tag: str, registry: str | None) -> str:
    """``repository:tag``, behind a pull-through cache ``registry`` prefix when given. A repository on a
    registry host of its own (a first part with a dot: ``public.ecr.aws/...``, ``ghcr.io/...``) goes below the
    prefix without its host, as the cache names it."""
    if registry:
        host, _, path = repository.partition("/")
        if "." in host and path:
            repository = path
    return f"{with_registry(repository, registry)}:{tag}"


def flag_present(args: list[str], flag: str) -> bool:
    """Whether ``flag`` appears in ``args`` as ``--flag`` or ``--flag=value``."""
    return any(a == flag or a.startswith(flag + "=") for a in args)


def gpu_tensor_parallel(params: ServeParams) -> int:
    """Tensor-parallel ranks on a GPU server: the settings' value, else one rank per GPU of the instance."""
    return params.settings.tensor_parallel_size or max(1, params.accelerator_count)


def server_args(params: ServeParams, *, model_flag: str, tp_flag: str, tensor_parallel: int) -> list[str]:
    """The flags an OpenAI-compatible Python server (vLLM, SGLang) starts with: what to load, the name it
    answers to, where it listens, its tensor-parallel ranks and, when asked, ``--trust-remote-code``.
    ``model_flag`` and ``tp_flag`` are the server's own spellings."""
    args = [
        model_flag,
        params.model,
        "--served-model-name",
        params.served_model_name,
        "--host",
        params.host,
        "--port",
        str(params.port),
        tp_flag,
        str(tensor_parallel),
    ]
    if params.trust_remote_code:
        args.append("--trust-remote-code")
    return args


def tensor_parallel_error(params: ServeParams, tp: int, devices: str) -> str | None:
    """Why ``tp`` ranks cannot run on the instance's ``accelerator_count`` ``devices`` (None when they can)."""
    count = params.accelerator_count
    if count and tp > count:
        return f"tensor_parallel_size {tp} exceeds the {count} {devices}; set it to {count} or fewer"
    return None
