"""The API keys of the service as the CLI lists and revokes them (``api/auth.py`` makes them)."""

from __future__ import annotations

from typing import Any

from accelbench.store import Store


def list_api_keys(store: Store) -> list[dict[str, Any]]:
    """Every key: name, role, prefix, when created and last used, whether revoked (never the key)."""
    return list(store.list_api_keys())


def revoke_api_key(store: Store, name: str) -> None:
    store.revoke_api_key(name)
