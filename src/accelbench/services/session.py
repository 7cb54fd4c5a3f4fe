"""The store handle a shell holds. The CLI, the API, the pages and the worker open the store here and pass the
handle to the use cases of ``services``; they never read or write through it themselves, so every query the
product makes is written once, in ``services``.

``get_store`` opens the whole store; ``get_run_listing`` only what listing runs needs (``store/run_list.py``: the
runs table read with SQLAlchemy Core), so ``runs list`` starts without the ORM and the rest of the store. The
whole store's code loads when it is first opened or named (``accelbench.store`` loads it on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench import store
from accelbench.store.run_list import RunListing, get_run_listing

if TYPE_CHECKING:
    from accelbench.store.repo import Store

__all__ = ["RunListing", "Store", "get_run_listing", "get_store", "whole_store"]


def get_store(url: str | None = None) -> Store:
    """The process-wide store for ``url`` (default: from settings), migrated on first use."""
    return store.get_store(url)


def whole_store(listing: RunListing) -> Store:
    """``listing`` when it is the whole store already, else the process's whole store of the same database."""
    return listing if isinstance(listing, store.Store) else store.get_store(listing.url)


def __getattr__(name: str) -> Any:
    if name != "Store":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return store.Store
