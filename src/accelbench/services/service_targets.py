"""The endpoint targets a running service allows: while the service runs, the worker's endpoint targets check
and pin the servers they reach against the settings' allowed targets and the service's own listening addresses
(``deploy/target_policy.py``); when it stops, that policy is lifted."""

from __future__ import annotations

from accelbench.deploy.target_policy import enforce, note_listening, service_policy


def apply_service_policy(running: bool) -> None:
    """``running``: the service's policy applies from now on; False: it is lifted (the service stopped)."""
    enforce(service_policy() if running else None)


def guard_service(host: str, port: int) -> None:
    """What the service checks before it listens: it never reaches itself (its address is noted for the
    targets' policy) and the policy on the targets it may reach holds, before its worker can take a run."""
    note_listening(host, port)  # the service never reaches itself
    enforce(service_policy())  # before the worker can take a run
