"""The results store: SQLAlchemy 2 tables, alembic migrations, and the repository every layer uses.

SQLite under the data dir by default; PostgreSQL when ``ACCELBENCH_DATABASE_URL`` says so.
"""

from accelbench.store.repo import Store, get_store

__all__ = ["Store", "get_store"]
