"""Helpers shared by the runtime modules: image references, version spelling and common flag building.

Kept apart from ``base.py`` (the interface) so runtimes can share behaviour without widening the interface.
"""

from __future__ import annotations


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


def flag_present(args: list[str], flag: str) -> bool:
    """Whether ``flag`` appears in ``args`` as ``--flag`` or ``--flag=value``."""
    return any(a == flag or a.startswith(flag + "=") for a in args)
