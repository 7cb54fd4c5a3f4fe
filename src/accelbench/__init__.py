"""accelbench: choose, deploy, measure and compare hardware for serving large language models."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("accelbench")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
