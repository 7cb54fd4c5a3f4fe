"""The results store: SQLAlchemy 2 tables, alembic migrations, and the repository every layer uses.

SQLite under the data dir by default; PostgreSQL when ``ACCELBENCH_DATABASE_URL`` says so.

``Store`` and ``get_store`` (``store/repo.py``) load when first asked for: a module of the store that needs less
(``runs list`` needs the tables and ``store/run_list.py`` only) does not import the ORM and every part of the store
through this package (start-up time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.store.repo import Store, get_store

__all__ = ["Store", "get_store"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # start-up time: the full store (the ORM and every part of the store) loads only when it is asked for
    from accelbench.store import repo

    value = getattr(repo, name)
    globals()[name] = value
    return value
