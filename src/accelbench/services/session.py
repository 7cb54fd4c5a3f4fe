"""The store handle a shell holds. The CLI, the API, the pages and the worker open the store here and pass the
handle to the use cases of ``services``; they never read or write through it themselves, so every query the
product makes is written once, in ``services``.
"""

from __future__ import annotations

from accelbench.store import Store, get_store

__all__ = ["Store", "get_store"]
