"""Sweep spec files: strict loading, errors that name the key, comparison for resume."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from accelbench.bench.spec import load_sweep_file, parse_sweep_file, spec_differences
from accelbench.domain.run import SweepSpec
from accelbench.errors import UserInputError


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "sweep.yaml"
    p.write_text(text)
    return p


def test_full_spec_loads(tmp_path: Path) -> None:
    f = load_sweep_file(
        write(
            tmp_path,
            """
label: cpu-baseline
input_lens: [128, 512]
concurrency: [1, 4, 8]
repeats: 3
output_len: 64
prompts_per_concurrency: 5
endpoint: completions
request_rate: .inf
num_warmups: 2
goodput: {ttft_ms: 500, tpot_ms: 50}
server:
  base_url: http://127.0.0.1:8000
  served_model: smol
  headers: {X-Team: perf}
""",
        )
    )
    spec = f.sweep_spec()
    assert type(spec) is SweepSpec
    assert spec.input_lens == [128, 512] and spec.concurrency == [1, 4, 8] and spec.repeats == 3
    assert spec.output_len == 64 and spec.prompts_per_concurrency == 5
    assert spec.endpoint.value == "completions"
    assert math.isinf(spec.request_rate)
    assert spec.goodput is not None and spec.goodput.tpot_ms == 50
    assert f.label == "cpu-baseline"
    assert f.server is not None and f.server.base_url == "http://127.0.0.1:8000"
    assert f.server.headers == {"X-Team": "perf"}
    assert spec.cells() == [(128, 1), (128, 4), (128, 8), (512, 1), (512, 4), (512, 8)]


def test_unknown_top_level_key_is_named_with_suggestion(tmp_path: Path) -> None:
    with pytest.raises(UserInputError) as e:
        load_sweep_file(write(tmp_path, "input_lens: [128]\nconcurency: [1, 2]\n"))
    assert "unknown key 'concurency'" in e.value.message
    assert "did you mean 'concurrency'" in e.value.message
    assert str(tmp_path / "sweep.yaml") in e.value.message
    assert e.value.hint is not None and "prompts_per_concurrency" in e.value.hint


def test_unknown_nested_key_is_named_with_path(tmp_path: Path) -> None:
    with pytest.raises(UserInputError) as e:
        load_sweep_file(write(tmp_path, "server:\n  base_ur: http://x\n"))
    assert "unknown key 'server.base_ur'" in e.value.message
    assert "did you mean 'server.base_url'" in e.value.message
    with pytest.raises(UserInputError, match=r"unknown key 'goodput.ttft'.*'goodput.ttft_ms'"):
        load_sweep_file(write(tmp_path, "goodput: {ttft: 100}\n"))


def test_bad_values_name_the_key() -> None:
    with pytest.raises(UserInputError, match=r"repeats must be at least 1 \(got 0\)"):
        parse_sweep_file({"repeats": 0})
    with pytest.raises(UserInputError, match=r"concurrency: .*unique"):
        parse_sweep_file({"concurrency": [4, 4]})
    with pytest.raises(UserInputError, match=r"input_lens\.1 must be a whole number"):
        parse_sweep_file({"input_lens": [128, "lots"]})
    with pytest.raises(UserInputError, match=r"endpoint must be chat or completions"):
        parse_sweep_file({"endpoint": "responses"})


def test_not_a_mapping_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="top level must be a mapping"):
        load_sweep_file(write(tmp_path, "- 128\n- 512\n"))
    with pytest.raises(UserInputError, match=r"not valid YAML at line 3"):
        load_sweep_file(write(tmp_path, "repeats: 2\nconcurrency: [1, 2\n"))
    with pytest.raises(UserInputError, match="does not exist"):
        load_sweep_file(tmp_path / "missing.yaml")
    assert parse_sweep_file(None).sweep_spec() == SweepSpec()


def test_spec_differences() -> None:
    a = SweepSpec(input_lens=[128], concurrency=[1, 4], repeats=2)
    assert spec_differences(a, a.model_copy()) == []
    b = SweepSpec(input_lens=[128], concurrency=[1, 8], repeats=2, output_len=64)
    assert spec_differences(a, b) == ["concurrency: [1, 4] -> [1, 8]", "output_len: 128 -> 64"]
