"""Fixtures for the deploy tests: a private cache dir, a toy runtime + engine whose server is
``tests/support/toy_engine.py`` (a real child process, for the process-handling tests), toy wheels for the
installer tests, and a minimal Hugging Face model directory."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import sys
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from accelbench.deploy import engines
from accelbench.domain.instance_types import AcceleratorType
from accelbench.runtimes.runtime import RUNTIMES, Runtime, ServeParams
from accelbench.settings import reset_settings_cache
from tests.support import toy_engine

TOY_ENGINE_SCRIPT = Path(toy_engine.__file__).resolve()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache dir of this test's own (engines and models), so nothing touches the shared one."""
    d = tmp_path / "cache"
    monkeypatch.setenv("ACCELBENCH_CACHE_DIR", str(d))
    reset_settings_cache()
    return d


class ToyRuntime(Runtime):
    """Starts tests/support/toy_engine.py; extra_args carry the toy's behaviour switches."""

    name = "toy"
    accelerators = frozenset({AcceleratorType.cpu})
    tool_version_key = "toy"
    default_version = "1.0"

    def default_image(self, version: str, registry: str | None = None, arch: str = "x86_64") -> str:
        return f"toy:{version}"

    def serve_args(self, params: ServeParams) -> list[str]:
        return [
            "--model",
            params.model,
            "--served-model-name",
            params.served_model_name,
            "--host",
            params.host,
            "--port",
            str(params.port),
            *params.settings.extra_args,
        ]

    def command(self, params: ServeParams, python: str = "python3") -> list[str]:
        return [python, str(TOY_ENGINE_SCRIPT), *self.serve_args(params)]

    def env(self, params: ServeParams) -> dict[str, str]:
        return {"TOY_SETTING": "on", **params.settings.env}

    def map_quantization(self, quantization: str | None, *, streaming: bool = False) -> list[str]:
        return []

    def validate(self, params: ServeParams) -> list[str]:
        errors = super().validate(params)
        if params.settings.max_num_seqs == 13:
            errors.append("max_num_seqs 13 is unlucky")
        return errors


TOY_RECIPE = engines.EngineRecipe(
    name="toy",
    default_version="1.0",
    description="toy engine for tests",
    package="toy-engine",
    requirements=lambda v: [],
    required_disk_gb=0.0001,
    archs=frozenset({"x86_64", "aarch64"}),
    python_min=(3, 8),
)


@pytest.fixture
def toy_engine_installed(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> engines.EngineInstall:
    """The toy runtime registered and a toy engine 'installed' (its Python is this interpreter)."""
    return install_fake_engine(monkeypatch, ToyRuntime(), TOY_RECIPE)


def install_fake_engine(
    monkeypatch: pytest.MonkeyPatch, runtime: object, recipe: engines.EngineRecipe
) -> engines.EngineInstall:
    """Register ``runtime`` and ``recipe`` under the recipe's name and mark version 1.0 installed, with
    this interpreter as the engine's Python."""
    monkeypatch.setitem(RUNTIMES._items, recipe.name, runtime)
    monkeypatch.setitem(engines.ENGINES._items, recipe.name, recipe)
    root = engines.engine_dir(recipe.name, "1.0")
    root.mkdir(parents=True)
    info = engines.EngineInstall(
        name=recipe.name,
        version="1.0",
        path=str(root),
        python=sys.executable,
        python_version="3",
        arch="x86_64",
        installed_at=datetime.now(UTC),
        install_seconds=0.0,
    )
    (root / engines.MARKER).write_text(info.model_dump_json())
    return info


@pytest.fixture
def hf_model_dir(tmp_path: Path) -> Path:
    """A directory that passes the static checks of a Hugging Face model (no real weights)."""
    d = tmp_path / "Toy-Model-1B"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    (d / "tokenizer.json").write_text("{}")
    return d


@pytest.fixture
def pid_dir(tmp_path: Path) -> Iterator[Path]:
    """Where toy processes write their pids; after the test, any still alive is killed (and the test fails
    through its own assertions, not through leftovers)."""
    d = tmp_path / "pids"
    d.mkdir()
    yield d
    for f in d.glob("*.pid"):
        pid = int(f.stem)
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()


def alive_pids(pid_dir: Path) -> list[int]:
    alive = []
    for f in pid_dir.glob("*.pid"):
        pid = int(f.stem)
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def make_wheel(directory: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A minimal, valid pure-Python wheel (so installer tests need no index)."""
    dist = f"{name.replace('-', '_')}-{version}"
    contents: dict[str, bytes] = {k: v.encode() for k, v in files.items()}
    contents[f"{dist}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    )
    contents[f"{dist}.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: accelbench-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for path, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}.dist-info/RECORD,,")
    contents[f"{dist}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    out = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as zf:
        for path, data in contents.items():
            zf.writestr(path, data)
    return out


def env_without(*names: str) -> dict[str, Any]:
    return {k: v for k, v in os.environ.items() if k not in names}


# ---- a fake engine that streams like vLLM (the project's fixture server), for the orchestrator tests

STREAM_SERVER_SCRIPT = Path(__file__).resolve().parents[2] / "support" / "stream_server.py"


class FixtureServerRuntime(ToyRuntime):
    """Starts tests/support/stream_server.py (OpenAI streaming, /metrics, /tokenize) as the 'engine'.
    ``settings.env["FIXTURE_SCRIPT"]`` carries the server's default timing script (JSON)."""

    name = "fixture"

    def command(self, params: ServeParams, python: str = "python3") -> list[str]:
        return [
            python,
            str(STREAM_SERVER_SCRIPT),
            "--host",
            params.host,
            "--port",
            str(params.port),
            "--model",
            params.served_model_name,
            "--tokenizer-dir",
            params.model,
            "--script",
            params.settings.env.get("FIXTURE_SCRIPT", "{}"),
        ]


@pytest.fixture
def fixture_engine(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> engines.EngineInstall:
    recipe = engines.EngineRecipe(**{**TOY_RECIPE.__dict__, "name": "fixture", "package": "fixture"})
    return install_fake_engine(monkeypatch, FixtureServerRuntime(), recipe)


@pytest.fixture
def fixture_model_dir(tmp_path: Path) -> Path:
    """A model directory whose tokenizer the fixture server and the load generator both use."""
    from tests.support.stream_server import make_tokenizer_dir

    d = make_tokenizer_dir(tmp_path / "fixture-model")
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    return d
