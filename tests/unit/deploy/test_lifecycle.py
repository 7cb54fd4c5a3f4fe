"""The final-status policy every run follows, whatever its target, as one table."""

from __future__ import annotations

import pytest

from accelbench.deploy.base import settle
from accelbench.domain.run import RunStatus

S = RunStatus


@pytest.mark.parametrize(
    ("status", "problems", "final"),
    [
        (S.completed, [], S.completed),
        (S.completed, ["node still running"], S.failed),  # the figures stand, but something may be billed
        (S.failed, ["node still running"], S.failed),
        (S.cancelled, ["node still running"], S.cancelled),  # EC2 used to turn this into failed
        (S.interrupted, ["node still running"], S.interrupted),
        (S.cancelled, [], S.cancelled),
        (S.interrupted, [], S.interrupted),
    ],
)
def test_final_status_policy(status: RunStatus, problems: list[str], final: RunStatus) -> None:
    got, error = settle(status, "why" if status != S.completed else None, problems)
    assert got == final
    if problems:
        assert error is not None and "Teardown failed: node still running" in error
    else:
        assert error == ("why" if status != S.completed else None)
