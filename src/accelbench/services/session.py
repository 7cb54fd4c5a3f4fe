"""The store handle a shell holds. The CLI, the API, the pages and the worker open the store here and pass the
handle to the use cases of ``services``; they never read or write through it themselves, so every query the
product makes is written once, in ``services``.

``get_store`` opens the whole store; ``get_run_listing`` only what listing runs needs (``store/run_list.py``: the
runs table read with SQLAlchemy Core), so ``runs list`` starts without the ORM and the rest of the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.store.run_list import RunListing, get_run_listing

if TYPE_CHECKING:
    from accelbench.store.repo import Store

__all__ = ["RunListing", "Store", "get_run_listing", "get_store", "whole_store"]


def get_store(url: str | None = None) -> Store:
    """The process-wide store for ``url`` (default: from settings), migrated on first use."""
    # start-up time: the whole store (the ORM and every part) loads when a command opens it, not with this module
    from accelbench.store.repo import get_store as open_store

    return open_store(url)


def whole_store(store: RunListing) -> Store:
    """``store`` when it is the whole store already, else the process's whole store of the same database."""
    # start-up time: as in get_store
    from accelbench.store.repo import Store, get_store

    return store if isinstance(store, Store) else get_store(store.url)


def __getattr__(name: str) -> Any:
    if name != "Store":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # start-up time: as in get_store, the class loads with the whole store when a caller names it
    from accelbench.store.repo import Store

    return Store
