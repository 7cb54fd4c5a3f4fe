"""A process that starts a run and dies the way SIGKILL leaves one: no finally, no atexit (for the tests of
dead-owner recovery)."""

from __future__ import annotations

import textwrap

KILLED_CLI = textwrap.dedent(
    """
    import os, sys
    from accelbench.domain.run import RunStatus
    from accelbench.store import Store
    store = Store(sys.argv[1])
    run = store.create_run(kind="sweep", model="m")
    store.set_status(run.id, RunStatus.benchmarking)
    print(run.id, flush=True)
    os._exit(0)  # no finally, no atexit: what SIGKILL leaves behind
    """
)
