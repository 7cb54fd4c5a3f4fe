"""The store's reference data and access: prices, tool versions, the audit log, API keys, calibrations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update

from accelbench.domain.instance_types import Price, PriceTier
from accelbench.errors import ConflictError, NotFoundError
from accelbench.store.database import StoreBase, _aware, jsonable
from accelbench.store.models import (
    ApiKeyRow,
    AuditRow,
    CalibrationRow,
    PriceRow,
    ToolVersionRow,
    utcnow,
)


class AdminStore(StoreBase):
    """Prices, tool versions, audit, API keys and calibrations."""

    def upsert_prices(self, prices: Sequence[Price]) -> int:
        """Insert or replace prices keyed by (instance type, region, tier, date). Returns rows written."""
        n = 0
        with self.session() as s:
            for p in prices:
                row = s.scalars(
                    select(PriceRow).where(
                        PriceRow.instance_type == p.instance_type,
                        PriceRow.region == p.region,
                        PriceRow.tier == p.tier.value,
                        PriceRow.effective_date == p.effective_date,
                    )
                ).first()
                if row is None:
                    s.add(
                        PriceRow(
                            instance_type=p.instance_type,
                            region=p.region,
                            tier=p.tier.value,
                            usd_per_hour=p.usd_per_hour,
                            effective_date=p.effective_date,
                            source=p.source,
                        )
                    )
                else:
                    row.usd_per_hour, row.source, row.fetched_at = p.usd_per_hour, p.source, utcnow()
                n += 1
        return n

    def latest_prices(
        self, *, region: str | None = None, instance_type: str | None = None, tier: PriceTier | None = None
    ) -> list[Price]:
        """The newest stored price per (instance type, region, tier)."""
        q = select(PriceRow)
        if region:
            q = q.where(PriceRow.region == region)
        if instance_type:
            q = q.where(PriceRow.instance_type == instance_type)
        if tier:
            q = q.where(PriceRow.tier == tier.value)
        latest: dict[tuple[str, str, str], PriceRow] = {}
        with self.session() as s:
            for row in s.scalars(q.order_by(PriceRow.effective_date, PriceRow.fetched_at)):
                latest[(row.instance_type, row.region, row.tier)] = row
            return [
                Price(
                    instance_type=r.instance_type,
                    region=r.region,
                    tier=PriceTier(r.tier),
                    usd_per_hour=r.usd_per_hour,
                    effective_date=r.effective_date,
                    source=r.source,
                )
                for r in latest.values()
            ]

    def get_tool_versions(self) -> dict[str, str]:
        with self.session() as s:
            return {r.key: r.value for r in s.scalars(select(ToolVersionRow))}

    def set_tool_version(
        self, key: str, value: str, *, actor: str | None = None, source: str = "cli"
    ) -> bool:
        """Set one tool version; writes an audit line. Returns False when the value did not change."""
        with self.session() as s:
            row = s.get(ToolVersionRow, key)
            old = row.value if row else None
            if old == value:
                return False
            if row is None:
                s.add(ToolVersionRow(key=key, value=value))
            else:
                row.value = value
            s.add(AuditRow(key=key, old_value=old, new_value=value, actor=actor, source=source))
            return True

    def audit_log(self, limit: int = 100) -> list[dict[str, Any]]:
        with self.session() as s:
            return [
                {
                    "at": _aware(r.at),
                    "key": r.key,
                    "old_value": r.old_value,
                    "new_value": r.new_value,
                    "actor": r.actor,
                    "source": r.source,
                }
                for r in s.scalars(select(AuditRow).order_by(AuditRow.id.desc()).limit(limit))
            ]

    def add_api_key(self, name: str, prefix: str, key_hash: str, role: str = "user") -> None:
        with self.session() as s:
            if s.scalars(select(ApiKeyRow).where(ApiKeyRow.name == name)).first() is not None:
                raise ConflictError(
                    f"An API key named {name!r} exists; choose another name or revoke it first."
                )
            s.add(ApiKeyRow(name=name, prefix=prefix, key_hash=key_hash, role=role))

    def api_keys_with_prefix(self, prefix: str) -> list[tuple[int, str, str, str]]:
        """(id, stored hash, name, role) of every key not revoked with this lookup prefix."""
        with self.session() as s:
            return [
                (r.id, r.key_hash, r.name, r.role)
                for r in s.scalars(
                    select(ApiKeyRow).where(ApiKeyRow.prefix == prefix, ApiKeyRow.revoked.is_(False))
                )
            ]

    def touch_api_key(self, key_id: int) -> None:
        with self.session() as s:
            s.execute(update(ApiKeyRow).where(ApiKeyRow.id == key_id).values(last_used_at=utcnow()))

    def list_api_keys(self) -> list[dict[str, Any]]:
        with self.session() as s:
            return [
                {
                    "name": r.name,
                    "prefix": r.prefix,
                    "created_at": _aware(r.created_at),
                    "last_used_at": _aware(r.last_used_at),
                    "revoked": r.revoked,
                    "role": r.role,
                }
                for r in s.scalars(select(ApiKeyRow).order_by(ApiKeyRow.id))
            ]

    def revoke_api_key(self, name: str) -> None:
        with self.session() as s:
            row = s.scalars(select(ApiKeyRow).where(ApiKeyRow.name == name)).first()
            if row is None:
                raise NotFoundError(f"No API key named {name!r}.")
            row.revoked = True

    def save_calibration(
        self,
        *,
        accelerator: str,
        engine: str,
        factors: dict[str, Any],
        n_points: int,
        error_before: dict[str, Any],
        error_after: dict[str, Any],
    ) -> int:
        """Store a new calibration and make it the active one for (accelerator, engine)."""
        with self.session() as s:
            s.execute(
                update(CalibrationRow)
                .where(CalibrationRow.accelerator == accelerator, CalibrationRow.engine == engine)
                .values(active=False)
            )
            row = CalibrationRow(
                accelerator=accelerator,
                engine=engine,
                factors=jsonable(factors),
                n_points=n_points,
                error_before=jsonable(error_before),
                error_after=jsonable(error_after),
                active=True,
            )
            s.add(row)
            s.flush()
            return row.id

    def active_calibrations(self) -> list[dict[str, Any]]:
        with self.session() as s:
            return [
                {
                    "id": r.id,
                    "accelerator": r.accelerator,
                    "engine": r.engine,
                    "factors": r.factors,
                    "n_points": r.n_points,
                    "error_before": r.error_before,
                    "error_after": r.error_after,
                    "created_at": _aware(r.created_at),
                }
                for r in s.scalars(
                    select(CalibrationRow).where(CalibrationRow.active.is_(True)).order_by(CalibrationRow.id)
                )
            ]
