"""Who executes a run: an owner id ``HOST-PID-TAG`` names one process of one host.

A service worker's tag is random; a run executed directly by a CLI process gets the tag ``proc``. The store
keeps the owner of every in-flight run (``store/owner.py`` finds the dead ones); the load generator names this
process when it makes the run it measures.
"""

from __future__ import annotations

import os
import socket

PROCESS_TAG = "proc"


def process_owner(tag: str = PROCESS_TAG) -> str:
    """The owner id of this process."""
    return f"{socket.gethostname()}-{os.getpid()}-{tag}"
