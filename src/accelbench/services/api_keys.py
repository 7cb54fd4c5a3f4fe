"""API keys in the store, as the service's authentication reads and writes them and the CLI lists and revokes
them: whether any live key exists, the keys that share a key's public prefix (to verify the secret against), a
key's last use, a new key's hash, every key's public facts, a revocation. ``api/auth.py`` makes and verifies
the keys; the store holds only their hashes."""

from __future__ import annotations

from typing import Any

from accelbench.store import Store


def any_live_key(store: Store) -> bool:
    """Whether a key that is not revoked exists (then the API needs a token for writes)."""
    return any(not k["revoked"] for k in store.list_api_keys())


def keys_with_prefix(store: Store, prefix: str) -> list[tuple[int, str, str, str]]:
    """(id, stored hash, name, role) of each live key with this public prefix."""
    return list(store.api_keys_with_prefix(prefix))


def touch_key(store: Store, key_id: int) -> None:
    """Note that the key was used now."""
    store.touch_api_key(key_id)


def add_key(store: Store, name: str, prefix: str, key_hash: str, role: str) -> None:
    store.add_api_key(name, prefix, key_hash, role=role)


def list_api_keys(store: Store) -> list[dict[str, Any]]:
    """Every key: name, role, prefix, when created and last used, whether revoked (never the key)."""
    return list(store.list_api_keys())


def revoke_api_key(store: Store, name: str) -> None:
    store.revoke_api_key(name)
