"""A use case's request handed on to the function that does the work, whose keywords its fields mirror."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def keywords(request: DataclassInstance, *but: str) -> dict[str, Any]:
    """``request``'s fields (a dataclass) as keywords, but the ones named (the caller passes those itself)."""
    return {f.name: getattr(request, f.name) for f in fields(request) if f.name not in but}
