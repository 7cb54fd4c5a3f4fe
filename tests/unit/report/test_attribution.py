"""Who and where a run is (report/attribution.py): the served name is the model, never the --tokenizer
directory; remote and imported runs are named as such, never "this machine"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunStatus
from accelbench.report.attribution import model_label, ran_here, tokenizer_of, where_label


def _run(**kw: Any) -> RunInfo:
    return RunInfo(id="r1", kind=kw.pop("kind", "bench"), status=RunStatus.completed,
                   created_at=datetime.now(UTC), **kw)  # fmt: skip


def test_an_old_run_that_stored_its_tokenizer_as_the_model_shows_the_served_name() -> None:
    run = _run(model="/data/tok/qwen", served_model="qwen-chat",
               spec={"endpoint": {"base_url": "http://10.0.0.5:8000", "tokenizer": "/data/tok/qwen"}})  # fmt: skip
    assert model_label(run) == "qwen-chat"
    assert tokenizer_of(run) == "/data/tok/qwen"
    # a model recorded otherwise stands as recorded; no tokenizer: none shown
    assert model_label(_run(model="Qwen/Qwen2.5-7B", served_model="qwen-chat")) == "Qwen/Qwen2.5-7B"
    assert tokenizer_of(_run(model="m")) is None
    assert model_label(_run()) == "-"


def test_where_a_run_ran() -> None:
    assert where_label(_run(base_url="http://gpu-box.internal:8000", kind="sweep")) == (
        "remote endpoint (gpu-box.internal:8000)"
    )
    assert where_label(_run(base_url="http://bench:***@10.1.2.3:9000")) == "remote endpoint (10.1.2.3:9000)"
    assert where_label(_run(base_url="http://127.0.0.1:8000")) == "this machine"
    assert where_label(_run(base_url="http://localhost:8000")) == "this machine"
    assert where_label(_run(kind="run", target="local")) == "this machine"
    assert where_label(_run(kind="run", target="kubernetes", instance_type="g6.2xlarge")) == "g6.2xlarge"
    imported = _run(kind="import", target="import", base_url="http://127.0.0.1:8000",
                    extra={"source": "vllm bench serve --save-result"})  # fmt: skip
    assert where_label(imported) == "imported (vllm bench serve --save-result)"
    assert where_label(imported.model_copy(update={"instance_type": "g6e.xlarge"})) == (
        "imported (vllm bench serve --save-result) on g6e.xlarge"
    )
    assert where_label(_run()) == "-"
    assert ran_here(_run(base_url="http://127.0.0.1:1")) and not ran_here(_run(base_url="http://10.0.0.9:1"))
    assert not ran_here(imported)
