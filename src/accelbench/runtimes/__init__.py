"""Serving runtimes (engines): one module per runtime, all registered in ``RUNTIMES``.

A runtime turns serving parameters into the exact command, environment and container image. The same object
feeds the local process, the Kubernetes manifest and the export, so flags are never re-encoded elsewhere.
"""

from accelbench.runtimes.runtime import RUNTIMES, Runtime, ServeParams, get_runtime, runtime_for_accelerator

__all__ = ["RUNTIMES", "Runtime", "ServeParams", "get_runtime", "runtime_for_accelerator"]
