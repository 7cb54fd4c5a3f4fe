"""Secrets in a run spec's engine settings (``extra_args`` such as ``--api-key X`` / ``--token=X``, ``env`` such as
``HF_TOKEN`` or ``*_API_KEY``) follow hf_token's path: the stored spec carries the masked placeholder, the values
travel in memory to whatever executes the run and are put back before the engine starts; the database and every
file accelbench writes are searched for them afterwards (``accelbench run`` in-process, and the API's worker, on
SQLite and PostgreSQL). A run whose secrets are gone (the service restarted before it ran) fails, saying to
submit it again, and never starts an engine with the placeholder; a stored spec sent back is refused."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.deploy import engines
from accelbench.deploy.orchestrator import create_run, execute_run, take_secrets
from accelbench.domain.run import EndpointTarget, EngineSettings, EngineSpec, RunSpec, RunStatus
from accelbench.redact import MASK
from accelbench.runtimes.runtime import ServeParams
from accelbench.store import Store
from accelbench.store.repo import jsonable
from tests.integration.test_api_secrets import database_text, sqlite_bytes
from tests.support.api_app import ScriptedExecutor, api_for, wait_for
from tests.unit.deploy.conftest import TOY_RECIPE, FixtureServerRuntime, install_fake_engine

# Runs the fixture server after writing down what the process was given: the arguments after "--" (the spec's
# extra_args, which the fixture server would refuse) and the values of the spec's environment variables.
LAUNCH = """
import json, os, runpy, sys
cut = sys.argv.index("--")
names = json.loads(sys.argv[2])
seen = {"args": sys.argv[cut + 1:], "env": {n: os.environ.get(n) for n in names}}
with open(sys.argv[1], "w") as fh:
    json.dump(seen, fh)
sys.argv = sys.argv[3:cut]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


class SeenRuntime(FixtureServerRuntime):
    """The fixture server as the engine, its command carrying the spec's extra_args."""

    name = "seen"

    def __init__(self, seen_file: Path) -> None:
        self.seen_file = seen_file

    def command(self, params: ServeParams, python: str = "python3") -> list[str]:
        server = super().command(params, python)
        names = json.dumps(sorted(params.settings.env))
        return [
            python,
            "-c",
            LAUNCH,
            str(self.seen_file),
            names,
            *server[1:],
            "--",
            *params.settings.extra_args,
        ]


@pytest.fixture
def seen(cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the engine process writes what it was given (outside accelbench's data dir)."""
    path = tmp_path / "engine-saw.json"
    recipe = engines.EngineRecipe(**{**TOY_RECIPE.__dict__, "name": "seen", "package": "seen"})
    install_fake_engine(monkeypatch, SeenRuntime(path), recipe)
    return path


class Secrets:
    def __init__(self) -> None:
        self.arg, self.arg_eq, self.env_key, self.env_hf = (
            f"{what}-{secrets.token_hex(12)}" for what in ("argsecret", "eqsecret", "keysecret", "hfsecret")
        )

    @property
    def values(self) -> list[str]:
        return [self.arg, self.arg_eq, self.env_key, self.env_hf]

    def settings(self) -> dict[str, Any]:
        return {
            "extra_args": ["--max-num-seqs", "8", "--api-key", self.arg, f"--token={self.arg_eq}"],
            "env": {
                "FIXTURE_SCRIPT": json.dumps({"ttft_ms": 2, "itl_ms": 1}),
                "MY_API_KEY": self.env_key,
                "HF_TOKEN": self.env_hf,
                "PLAIN": "not-secret",
            },
        }

    def spec(self, model: Path) -> dict[str, Any]:
        return {
            "label": "with secrets",
            "model": str(model),
            "engine": {"name": "seen", "version": "1.0", "settings": self.settings()},
            "target": {"kind": "local", "startup_timeout_s": 60},
            "sweep": {
                "input_lens": [48],
                "concurrency": [1],
                "repeats": 1,
                "output_len": 4,
                "prompts_per_concurrency": 1,
                "num_warmups": 0,
            },
        }


def assert_nowhere_stored(store: Store, data_dir: Path, values: list[str]) -> None:
    """Not in any row of any table (and on SQLite not in the file's bytes, WAL included), not in any file under
    accelbench's data dir (the run directory with its engine log and report files)."""
    rows = database_text(store)
    raw = b"" if store.is_postgres else sqlite_bytes(store)
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert any(p.name == "engine.log" for p in files)  # the run directory is searched, not missed
    for value in values:
        assert value not in rows
        assert value.encode() not in raw
        for p in files:
            assert value.encode() not in p.read_bytes(), p


def assert_engine_got_them(seen: Path, s: Secrets) -> None:
    got = json.loads(seen.read_text())
    assert got["args"] == ["--max-num-seqs", "8", "--api-key", s.arg, f"--token={s.arg_eq}"]
    assert got["env"]["MY_API_KEY"] == s.env_key and got["env"]["HF_TOKEN"] == s.env_hf
    assert got["env"]["PLAIN"] == "not-secret"


def assert_stored_masked(stored_spec: dict[str, Any]) -> None:
    settings = stored_spec["engine"]["settings"]
    assert settings["extra_args"] == ["--max-num-seqs", "8", "--api-key", MASK, f"--token={MASK}"]
    assert settings["env"]["MY_API_KEY"] == MASK and settings["env"]["HF_TOKEN"] == MASK
    assert settings["env"]["PLAIN"] == "not-secret"


# ---- the rule, on the spec ----------------------------------------------------------------------------------


def test_the_stored_spec_masks_what_the_rule_masks_and_the_values_go_back() -> None:
    s = Secrets()
    spec = RunSpec.model_validate(
        {"model": "m", "hf_token": "hf_given", "engine": {"settings": s.settings()}}
    )
    stored = spec.public_dict()
    assert_stored_masked(stored)
    assert "hf_token" not in stored
    assert not any(v in json.dumps(stored) for v in s.values)
    kept = spec.secrets()
    assert kept == {
        "arg:3": s.arg,
        "arg:4": f"--token={s.arg_eq}",
        "env:MY_API_KEY": s.env_key,
        "env:HF_TOKEN": s.env_hf,
        "hf_token": "hf_given",
    }
    reloaded = RunSpec.model_validate(stored)
    assert reloaded.secrets() == {}  # placeholders hold no secret
    assert reloaded.secret_placeholders() == ["arg:3", "arg:4", "env:MY_API_KEY", "env:HF_TOKEN"]
    back = reloaded.with_secrets(kept)
    assert back.engine == spec.engine and back.hf_token == "hf_given"


def test_values_that_are_not_secret_are_left_alone() -> None:
    settings = EngineSettings(
        extra_args=["--max-num-batched-tokens", "8192", "odd***value", "--served-model-name", "x"],
        env={"TOKENIZERS_PARALLELISM": "false", "EMPTY_TOKEN": "", "NOTE": "a***b"},
    )
    assert settings.secret_slots() == {}
    spec = RunSpec(model="m", engine=EngineSpec(settings=settings))
    assert spec.public_dict()["engine"]["settings"] == settings.model_dump(mode="json")


# ---- the lifecycle --------------------------------------------------------------------------------------------


def test_accelbench_run_keeps_them_in_memory_only(
    store: Store, seen: Path, fixture_model_dir: Path, tmp_path: Path, isolated_env: Path
) -> None:
    s = Secrets()
    spec_file = tmp_path / "run.yaml"
    spec_file.write_text(yaml.safe_dump(s.spec(fixture_model_dir)))
    res = CliRunner().invoke(app, ["run", str(spec_file), "--format", "json"])
    assert res.exit_code == 0, res.output
    run = store.get_run(json.loads(res.stdout)["run"]["id"])
    assert run.status == RunStatus.completed, run.error
    assert_engine_got_them(seen, s)
    assert_stored_masked(run.spec)
    assert MASK in (run.command or "")
    assert not any(v in res.output for v in s.values)
    assert_nowhere_stored(store, isolated_env, s.values)
    assert take_secrets(run.id) == {}  # nothing left in memory either
    # a rerun reads the stored spec: its secrets are placeholders, so it is refused before anything starts
    again = CliRunner().invoke(app, ["rerun", run.id])
    assert again.exit_code == 2 and "placeholder" in again.output, again.output
    assert store.list_runs()[1] == 1


def test_the_api_worker_gets_them_in_memory_only(
    store: Store, seen: Path, fixture_model_dir: Path, isolated_env: Path
) -> None:
    s = Secrets()
    with api_for(store, start_worker=True) as api:  # the worker runs the orchestrator's execute_run
        r = api.client.post("/api/v1/runs", json=s.spec(fixture_model_dir), headers=api.auth)
        assert r.status_code == 202, r.text
        run_id = r.json()["id"]
        run = wait_for(lambda: (x := store.get_run(run_id)).status.finished and x, timeout=90)
        shown = api.client.get(f"/api/v1/runs/{run_id}").text
    assert run.status == RunStatus.completed, run.error
    assert_engine_got_them(seen, s)
    assert_stored_masked(run.spec)
    assert not any(v in shown for v in s.values)
    assert_nowhere_stored(store, isolated_env, s.values)


def test_a_run_whose_secrets_are_gone_fails_saying_to_resubmit(store: Store) -> None:
    s = Secrets()
    spec = RunSpec.model_validate(
        {
            "model": "org/model",
            "target": {"kind": "endpoint", "base_url": "http://x"},
            "engine": {"settings": s.settings()},
        }
    )
    assert isinstance(spec.target, EndpointTarget)
    run = create_run(store, spec)
    take_secrets(run.id)  # this process "restarted": what it kept in memory is gone
    deployed: list[object] = []

    def factory(config: Any, **context: Any) -> Any:
        deployed.append(config)
        raise AssertionError("no target may be made for a run whose secrets are gone")

    final = execute_run(store, run.id, target_factory=factory)
    assert final.status == RunStatus.failed and not deployed
    assert final.error is not None
    assert "engine.settings.extra_args[3]" in final.error and "engine.settings.env.HF_TOKEN" in final.error
    assert "Submit the run again with the secret values" in final.error


def test_a_restarted_service_fails_the_queued_run_with_the_reason(
    store: Store, seen: Path, fixture_model_dir: Path
) -> None:
    s = Secrets()
    busy = ScriptedExecutor()  # holds the first run in the middle of its sweep
    with api_for(store, executor=busy, start_worker=True) as api:
        first = api.client.post(
            "/api/v1/runs",
            json={**s.spec(fixture_model_dir), "engine": {"name": "seen", "version": "1.0"}},
            headers=api.auth,
        )
        assert first.status_code == 202, first.text
        assert busy.started.wait(20)
        queued = api.client.post("/api/v1/runs", json=s.spec(fixture_model_dir), headers=api.auth)
        assert queued.status_code == 202, queued.text
        queued_id = queued.json()["id"]
        assert store.get_run(queued_id).status == RunStatus.pending
    # the service stopped before the queued run started; a new one (the real executor) takes it
    with api_for(store, start_worker=True) as api:
        run = wait_for(lambda: (x := store.get_run(queued_id)).status.finished and x, timeout=30)
        shown = api.client.get(f"/api/v1/runs/{queued_id}").json()["run"]
    assert run.status == RunStatus.failed
    assert "secrets are never stored" in (run.error or "") and "Submit the run again" in (run.error or "")
    assert shown["error"] == run.error
    assert "deployment" not in run.extra and not seen.exists()  # no engine started with the placeholder
    assert_stored_masked(run.spec)


def test_a_stored_spec_sent_back_is_refused(store: Store, fixture_model_dir: Path, seen: Path) -> None:
    s = Secrets()
    spec = RunSpec.model_validate(s.spec(fixture_model_dir))
    stored = spec.public_dict()
    with api_for(store, start_worker=True, executor=ScriptedExecutor()) as api:
        r = api.client.post("/api/v1/runs", json=jsonable(stored), headers=api.auth)
        assert r.status_code == 400, r.text
        message = r.json()["error"]["message"]
        assert "placeholder" in message and "engine.settings.env.MY_API_KEY" in message
        assert store.list_runs()[1] == 0
