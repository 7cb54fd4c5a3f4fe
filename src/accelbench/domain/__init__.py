"""Shared value types (pydantic). One module per concept; this package imports nothing from the rest.

``StrictModel`` forbids unknown keys: everything a user writes (YAML specs, API bodies) goes through it, so a
misspelled key is an error that names the key, not a silently ignored setting.
"""

from accelbench.domain.strict import StrictModel

__all__ = ["StrictModel"]
