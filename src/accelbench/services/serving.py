"""What the service checks before it listens: it never reaches itself (its address is noted for the targets'
policy) and the policy on the targets it may reach holds, before its worker can take a run."""

from __future__ import annotations

from accelbench.deploy.target_policy import enforce, note_listening, service_policy


def guard_service(host: str, port: int) -> None:
    note_listening(host, port)  # the service never reaches itself
    enforce(service_policy())  # before the worker can take a run
