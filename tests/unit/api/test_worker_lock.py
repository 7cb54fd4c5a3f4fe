"""The SQLite worker lock on a filesystem it cannot write: one line saying what to do, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.errors import StoreError
from accelbench.services.worker import WorkerLock


def test_a_lock_file_that_cannot_be_created_is_a_store_error_with_the_way_out() -> None:
    # /proc takes no new files, whoever runs the test (root included, where a chmod-ed directory would not do)
    with pytest.raises(StoreError) as err:
        WorkerLock(Path("/proc/accelbench-test.worker.lock")).acquire()
    assert "cannot be written" in err.value.message and "\n" not in err.value.message
    assert err.value.hint and "--no-worker" in err.value.hint
