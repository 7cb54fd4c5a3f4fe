"""Base model for user-written data."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A pydantic model that rejects unknown keys.

    Why: a spec with ``concurency: 8`` must fail loudly instead of running the default concurrency.
    """

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        validate_assignment=True,
        ser_json_inf_nan="strings",
        defer_build=True,
    )
