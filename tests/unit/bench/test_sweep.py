"""The sweep against the in-repo streaming server, on SQLite and PostgreSQL: every (cell, repeat) stored as it
finishes, warmup once, distinct prompts, interruption keeps finished cells, resume completes only the missing."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.bench.sweep import cell_config, cell_seed, create_sweep_run, run_sweep, sweep_keys
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.run import CellStatus, RunStatus, SweepSpec
from accelbench.domain.sweep_events import CellKey, SweepEvent
from accelbench.errors import ConflictError
from accelbench.store.repo import Store
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir, spawn_server

SPEC = SweepSpec(
    input_lens=[48, 80],
    concurrency=[1, 3],
    repeats=2,
    prompts_per_concurrency=2,
    output_len=4,
    num_warmups=2,
    scrape_interval_s=0.05,
)
PROMPTS = sum(c * SPEC.prompts_per_concurrency for _, c in SPEC.cells()) * SPEC.repeats  # 32


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tokenizer_dir(tmp_path_factory.mktemp("tok"))


@pytest.fixture
def server(tokenizer_dir: Path) -> Iterator[StreamServer]:
    with StreamServer(Script(ttft_ms=5, itl_ms=2), tokenizer_dir=tokenizer_dir, model="smol") as s:
        yield s


def endpoint(base_url: str, tokenizer_dir: Path) -> Endpoint:
    return Endpoint(base_url=base_url, served_model="smol", tokenizer=str(tokenizer_dir))


def completion_logs(server: StreamServer) -> list:
    return [r for r in server.records if r.path.endswith("completions")]


def test_cell_config_and_seeds() -> None:
    keys = sweep_keys(SPEC)
    assert keys[:3] == [CellKey(48, 1, 0), CellKey(48, 1, 1), CellKey(48, 3, 0)]
    assert len(keys) == 8
    cfg = cell_config(SPEC, CellKey(80, 3, 1), label="x")
    assert (cfg.input_len, cfg.num_prompts, cfg.max_concurrency, cfg.output_len) == (80, 6, 3, 4)
    assert cfg.num_warmups == 0 and cfg.label == "x"
    assert cell_config(SPEC, keys[0], warmups=2).num_warmups == 2
    seeds = {cell_seed(SPEC.seed, k) for k in keys}
    assert len(seeds) == len(keys)  # every (cell, repeat) has its own prompts
    assert cell_seed(0, keys[0]) == cell_seed(0, CellKey(48, 1, 0))  # stable: resume sends the same prompts
    assert cell_seed(1, keys[0]) != cell_seed(0, keys[0])


def test_prompts_differ_across_the_whole_sweep(tokenizer_dir: Path) -> None:
    """The sweep's per-(cell, repeat) seeds give every request of the sweep its own prompt, with no shared
    beginning (a server's prefix cache would otherwise flatter later cells and repeats)."""
    from accelbench.bench import build_dataset, load_tokenizer

    tok = load_tokenizer(
        Endpoint(base_url="http://127.0.0.1:1", served_model="smol", tokenizer=str(tokenizer_dir))
    )
    texts = []
    for key in sweep_keys(SPEC):
        ds = build_dataset(cell_config(SPEC, key, warmups=SPEC.num_warmups), tok)
        texts += [p.text for p in ds.prompts] + [p.text for p in ds.warmups]
    assert len(texts) == PROMPTS + 8 * SPEC.num_warmups
    heads = Counter(tok.encode(t, add_special_tokens=False)[:4].__repr__() for t in texts)
    assert max(heads.values()) == 1


def test_full_sweep_stores_every_cell(store: Store, server: StreamServer, tokenizer_dir: Path) -> None:
    ep = endpoint(server.base_url, tokenizer_dir)
    run = create_sweep_run(store, ep, SPEC, label="fixture", environment={"command": "test"})
    events: list[SweepEvent] = []
    stored_when_seen: list[int] = []
    outcome = run_sweep(
        store,
        run.id,
        ep,
        SPEC,
        progress=events.append,
        on_cell=lambda cr: stored_when_seen.append(len(store.get_results(run.id))),
    )
    assert outcome.status == RunStatus.completed and outcome.error is None
    assert outcome.cells_done == outcome.cells_total == 8 and not outcome.missing
    # saved as soon as each finished, not at the end
    assert stored_when_seen == list(range(1, 9))
    results = store.get_results(run.id)
    assert [(r.input_len, r.concurrency, r.repeat) for r in results] == [tuple(k) for k in sweep_keys(SPEC)]
    for r in results:
        assert r.status == CellStatus.completed
        assert r.num_prompts == r.concurrency * SPEC.prompts_per_concurrency
        assert (r.completed, r.failed) == (r.num_prompts, 0)
        summary = store.get_summary(r.id)
        assert summary.config.max_concurrency == r.concurrency
        assert len(summary.requests) == r.num_prompts
        assert all(req.server_prompt_tokens == r.input_len for req in summary.requests)
        assert summary.telemetry_samples, "telemetry is stored with each cell"
    # warmup once: the server saw every measured prompt plus the warmups, no more
    logs = completion_logs(server)
    assert len(logs) == PROMPTS + SPEC.num_warmups
    assert all(r.prompt_tokens in SPEC.input_lens for r in logs)
    info = store.get_run(run.id)
    assert info.status == RunStatus.completed and info.finished_at is not None
    assert info.progress["cells_done"] == 8 and info.progress["cells_total"] == 8
    assert info.completed_requests == PROMPTS and info.failed_requests == 0
    assert info.spec["sweep"]["input_lens"] == [48, 80]
    kinds = Counter(e.kind for e in events)
    assert kinds["start"] == 1 and kinds["cell_start"] == 8 and kinds["cell_done"] == 8 and kinds["end"] == 1
    assert kinds["request"] >= 2 * 8  # the engine reports at its start, every 0.2 s and at its end


def test_cancel_keeps_finished_cells_and_resume_runs_only_the_missing(
    store: Store, tokenizer_dir: Path
) -> None:
    # slow enough that a cancel lands inside a cell: about 400 ms per request, the engine reports every 0.2 s
    with StreamServer(Script(ttft_ms=100, itl_ms=100), tokenizer_dir=tokenizer_dir, model="smol") as server:
        ep = endpoint(server.base_url, tokenizer_dir)
        run = create_sweep_run(store, ep, SPEC)
        cancel = threading.Event()
        target = CellKey(48, 3, 0)  # the third (cell, repeat)

        def progress(ev: SweepEvent) -> None:
            if ev.kind == "request" and ev.key == target and ev.requests_done >= 1:
                cancel.set()

        outcome = run_sweep(store, run.id, ep, SPEC, cancel=cancel, progress=progress)
        assert outcome.status == RunStatus.interrupted
        assert outcome.error is not None and "interrupted" in outcome.error
        assert outcome.ran == [CellKey(48, 1, 0), CellKey(48, 1, 1), target]
        assert outcome.partial == [target]
        results = {CellKey(r.input_len, r.concurrency, r.repeat): r for r in store.get_results(run.id)}
        assert set(results) == {CellKey(48, 1, 0), CellKey(48, 1, 1), target}
        assert results[CellKey(48, 1, 0)].status == CellStatus.completed
        partial = results[target]
        assert partial.status == CellStatus.partial
        assert 1 <= partial.completed < partial.num_prompts
        assert partial.failed >= 1  # the requests in flight, failed as "cancelled"
        info = store.get_run(run.id)
        assert info.status == RunStatus.interrupted and info.error == outcome.error
        assert info.progress["cells_done"] == 2 and info.progress["cells_total"] == 8
        kept = {k: results[k].id for k in (CellKey(48, 1, 0), CellKey(48, 1, 1))}
        sent_before = len(completion_logs(server))

        # resume: only the partial cell and the 5 never run are measured
        server.reset()
        server.script = Script(ttft_ms=5, itl_ms=2)  # the rest need not be slow
        again = run_sweep(store, run.id, ep, SPEC, resume=True)
        assert again.status == RunStatus.completed
        assert again.skipped == list(kept)
        assert again.ran == [k for k in sweep_keys(SPEC) if k not in kept]
        final = {CellKey(r.input_len, r.concurrency, r.repeat): r for r in store.get_results(run.id)}
        assert len(final) == 8 and all(r.status == CellStatus.completed for r in final.values())
        assert {k: final[k].id for k in kept} == kept  # finished cells were not measured again
        missing_prompts = sum(k.concurrency * SPEC.prompts_per_concurrency for k in again.ran)
        assert len(completion_logs(server)) == missing_prompts + SPEC.num_warmups
        assert sent_before > 0
        assert store.get_run(run.id).status == RunStatus.completed


def test_server_gone_keeps_finished_cells_and_marks_run_failed(store: Store, tokenizer_dir: Path) -> None:
    spec = SPEC.model_copy(update={"timeout_s": 10.0})
    with spawn_server(
        "--tokenizer-dir", str(tokenizer_dir), "--model", "smol", "--script", '{"ttft_ms": 20, "itl_ms": 40}'
    ) as proc:
        ep = endpoint(proc.base_url, tokenizer_dir)
        run = create_sweep_run(store, ep, spec)
        target = CellKey(48, 3, 1)  # the fourth (cell, repeat)

        def progress(ev: SweepEvent) -> None:
            if ev.kind == "request" and ev.key == target and ev.requests_done >= 1:
                proc.proc.kill()  # the server dies with requests in flight

        outcome = run_sweep(store, run.id, ep, spec, progress=progress)
    assert outcome.status == RunStatus.failed
    assert outcome.error is not None and "stopped answering" in outcome.error and str(target) in outcome.error
    results = {CellKey(r.input_len, r.concurrency, r.repeat): r for r in store.get_results(run.id)}
    assert [k for k, r in results.items() if r.status == CellStatus.completed] == sweep_keys(spec)[:3]
    assert results[target].status == CellStatus.partial
    assert results[target].completed >= 1 and results[target].failed >= 1
    assert outcome.ran[-1] == target and len(outcome.ran) == 4  # stopped: no cell tried against a dead server
    info = store.get_run(run.id)
    assert info.status == RunStatus.failed and "stopped answering" in (info.error or "")

    # a new server (another port): resume measures the rest there
    with StreamServer(Script(), tokenizer_dir=tokenizer_dir, model="smol") as server:
        again = run_sweep(store, run.id, endpoint(server.base_url, tokenizer_dir), spec, resume=True)
    assert again.status == RunStatus.completed and len(again.ran) == 5 and len(again.skipped) == 3
    assert store.get_run(run.id).status == RunStatus.completed


def test_resume_refuses_a_different_spec(store: Store, server: StreamServer, tokenizer_dir: Path) -> None:
    ep = endpoint(server.base_url, tokenizer_dir)
    small = SPEC.model_copy(update={"input_lens": [48], "concurrency": [1], "repeats": 1})
    run = create_sweep_run(store, ep, small)
    run_sweep(store, run.id, ep, small)
    with pytest.raises(ConflictError) as e:
        run_sweep(store, run.id, ep, small.model_copy(update={"output_len": 8, "repeats": 2}), resume=True)
    assert "output_len: 4 -> 8" in e.value.message and "repeats: 1 -> 2" in e.value.message
    with pytest.raises(ConflictError, match="already has results"):
        run_sweep(store, run.id, ep, small)
    # resuming a complete run measures nothing
    out = run_sweep(store, run.id, ep, small, resume=True)
    assert out.status == RunStatus.completed and out.ran == [] and len(out.skipped) == 1


def test_cell_where_every_request_fails_is_failed_and_sweep_goes_on(
    store: Store, tokenizer_dir: Path
) -> None:
    spec = SPEC.model_copy(update={"input_lens": [48], "concurrency": [1, 2], "repeats": 1, "num_warmups": 0})
    with StreamServer(Script(status=500), tokenizer_dir=tokenizer_dir, model="smol") as server:
        ep = endpoint(server.base_url, tokenizer_dir)
        run = create_sweep_run(store, ep, spec)
        outcome = run_sweep(store, run.id, ep, spec)
    assert outcome.ran == sweep_keys(spec)  # the server answers: no reason to stop
    assert outcome.failed == sweep_keys(spec)
    assert outcome.status == RunStatus.failed and "did not complete" in (outcome.error or "")
    results = store.get_results(run.id)
    assert [r.status for r in results] == [CellStatus.failed, CellStatus.failed]
    assert [r.failed for r in results] == [2, 4]


def test_a_resume_owns_the_run_refuses_a_second_one_and_clears_the_stale_error(
    store: Store, server: StreamServer, tokenizer_dir: Path
) -> None:
    """A resumed sweep kept the dead process as its owner (so the next `runs list` marked the live resume
    interrupted); two concurrent resumes both measured every missing cell; a completed resume kept the stale
    "Interrupted" error."""
    from accelbench.store.owner import in_flight_runs, process_owner, recover_dead_owners

    ep = endpoint(server.base_url, tokenizer_dir)
    small = SPEC.model_copy(update={"input_lens": [48], "concurrency": [1], "repeats": 1, "num_warmups": 0})
    run = create_sweep_run(store, ep, small)
    dead = "no-such-host-0-proc"
    store.update_run(
        run.id, worker_id=dead, status=RunStatus.interrupted, error="Interrupted: the process died."
    )

    seen: list[str | None] = []

    def during(ev: SweepEvent) -> None:
        if ev.kind == "cell_start":
            seen.append({r[0]: r[3] for r in in_flight_runs(store)}.get(run.id))
            assert recover_dead_owners(store) == []  # the live resume is not taken for a dead one
            with pytest.raises(ConflictError, match="being measured right now"):
                store.claim_run(run.id, owner=process_owner("second-resume"))

    out = run_sweep(store, run.id, ep, small, resume=True, progress=during)
    assert out.status == RunStatus.completed and len(out.ran) == 1
    assert seen == [process_owner()]
    final = store.get_run(run.id)
    assert final.status == RunStatus.completed and final.error is None


def test_a_sweep_runs_a_load_plan_in_every_cell_and_stores_each_stage(
    store: Store, server: StreamServer, tokenizer_dir: Path
) -> None:
    """Concurrency stages replace the concurrency axis: one cell per input length, keyed by the plan's peak, each
    with its figures per stage, and the stored spec loads again as the same sweep."""
    plan = [{"duration_s": 0.6, "concurrency": 1}, {"duration_s": 0.6, "concurrency": 3}]
    spec = SweepSpec(
        input_lens=[48, 80], stages=plan, prompts_per_concurrency=500, output_len=4, num_warmups=0
    )
    assert spec.concurrency == [3] and [tuple(k) for k in sweep_keys(spec)] == [(48, 3, 0), (80, 3, 0)]
    assert cell_config(spec, sweep_keys(spec)[0]).max_concurrency is None  # the plan sets what is in flight
    ep = endpoint(server.base_url, tokenizer_dir)
    run = create_sweep_run(store, ep, spec, label="plan", environment={"command": "test"})
    outcome = run_sweep(store, run.id, ep, spec)
    assert outcome.status == RunStatus.completed and outcome.cells_done == 2
    for r in store.get_results(run.id):
        summary = store.get_summary(r.id)
        assert [s.load for s in summary.per_stage] == ["concurrency 1", "concurrency 3"]
        assert all(s.completed > 0 for s in summary.per_stage)
        assert not any("request cap" in n for n in summary.notes)  # 1,500 requests outlast 1.2 s
    from accelbench.bench.sweep import stored_sweep_spec

    assert stored_sweep_spec(store.get_run(run.id)) == spec


def test_a_rate_plan_in_a_sweep_is_capped_by_each_level_and_says_when_the_cap_ended_it(
    store: Store, server: StreamServer, tokenizer_dir: Path
) -> None:
    plan = [{"duration_s": 1.0, "request_rate": 20}, {"duration_s": 1.0, "request_rate": 40}]
    spec = SweepSpec(input_lens=[48], concurrency=[1, 2], stages=plan, prompts_per_concurrency=4, output_len=4,
                     num_warmups=0)  # fmt: skip
    assert [cell_config(spec, k).max_concurrency for k in sweep_keys(spec)] == [1, 2]
    ep = endpoint(server.base_url, tokenizer_dir)
    run = create_sweep_run(store, ep, spec, label="rate plan", environment={"command": "test"})
    assert run_sweep(store, run.id, ep, spec).status == RunStatus.completed
    for r in store.get_results(run.id):
        summary = store.get_summary(r.id)
        assert summary.num_prompts == 4 * r.concurrency  # the cap, well before the plan's 60 arrivals
        assert any("request cap ended it" in n for n in summary.notes), summary.notes


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"stages": [{"duration_s": 1, "concurrency": 2}], "concurrency": [1, 2]},
            "leave concurrency unset or give",
        ),
        ({"stages": [{"duration_s": 1, "concurrency": 2}], "turns": 2}, "not with turns > 1"),
    ],
)
def test_plans_a_sweep_cannot_run_are_refused_saying_what_to_change(fields, message) -> None:  # type: ignore[no-untyped-def]
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        SweepSpec(**fields)
