"""accelbench: choose, deploy, measure and compare hardware for serving large language models."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    __version__: str

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed package's metadata when first asked for (``--version``, a run's
    environment, the API), not by every command that imports the package."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # start-up time: importlib.metadata takes about 30 ms to import and scans the installed distributions
    from importlib.metadata import PackageNotFoundError, version

    try:
        value = version("accelbench")
    except PackageNotFoundError:  # running from a source tree that was not installed
        value = "0.0.0+unknown"
    globals()["__version__"] = value
    return value
