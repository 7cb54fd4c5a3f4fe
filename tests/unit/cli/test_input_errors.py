"""Bad input on the command line is refused in plain words naming the flag the user typed, with exit code 2,
whichever command it reaches: the command tree is walked with a value outside every choice list and a negative
number for every bounded flag; then the checks the models make after parsing (quantization, goal, cost,
lengths), an unknown model, instance and run, and malformed files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, ValidationError
from typer.testing import CliRunner

from accelbench.cli.input_errors import flag_error, plain_words
from accelbench.cli.main import app
from tests.unit.cli.test_help_layout import choices, command_tree, shown_params

runner = CliRunner(env={"COLUMNS": "200"})
# pydantic's own wording, which a person should never see
PYDANTIC = ("Input should", "Value error", "validation error", "type=", "errors.pydantic.dev")


def refused(args: list[str]) -> str:
    res = runner.invoke(app, args)
    out = res.output
    assert res.exit_code == 2, f"accelbench {' '.join(args)}: exit {res.exit_code}\n{out}"
    assert "Traceback" not in out, out
    leaked = [p for p in PYDANTIC if p in out]
    assert not leaked, f"accelbench {' '.join(args)} shows pydantic's words {leaked}:\n{out}"
    return " ".join(out.replace("│", " ").split())


def bad_values() -> list[tuple[list[str], str, str]]:
    """(command path, flag, bad value) for every choice flag and every flag with a lower bound of 0 or more."""
    cases = []
    for path, cmd in command_tree():
        if cmd is None or getattr(cmd, "commands", None):
            continue
        for p in shown_params(cmd):
            longs = [o for o in p.opts if o.startswith("--")]
            if p.param_type_name != "option" or not longs or getattr(p, "is_flag", False):
                continue
            if choices(p):
                cases.append((path, longs[0], "no-such-choice"))
            low = getattr(p, "min", None)
            if low is not None and low >= 0:
                cases.append((path, longs[0], "-5"))
    return cases


def _id(case: Any) -> str:
    path, flag, value = case
    return f"{' '.join(path)} {flag} {value}"


@pytest.mark.parametrize("case", bad_values(), ids=_id)
def test_a_bad_flag_value_is_refused_in_words_with_exit_2(case: tuple[list[str], str, str]) -> None:
    path, flag, value = case
    out = refused([*path, flag, value])
    assert flag in out and repr(value) in out, out
    assert "must be" in out or "is not one of" in out, out


def test_the_walk_reaches_choices_and_bounds() -> None:
    flags = {(" ".join(path), flag) for path, flag, _ in bad_values()}
    assert {("bench", "--endpoint"), ("estimate", "--concurrency"), ("sweep", "--max-error-rate")} <= flags
    assert len(flags) > 40


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["estimate", "-m", "qwen2.5-7b-instruct", "--quantization", "fp4"],
            "--quantization: unknown quantization 'fp4'",
        ),
        (
            ["estimate", "-m", "qwen2.5-7b-instruct", "--goal", "fast"],
            "--goal must be cost or latency (got 'fast')",
        ),
        (
            ["estimate", "-m", "qwen2.5-7b-instruct", "--max-cost", "0"],
            "--max-cost must be more than 0 (got 0)",
        ),
        (["estimate", "-m", "no-such-model"], "Unknown model 'no-such-model'"),
        (
            ["recommend", "-m", "qwen2.5-7b-instruct", "-i", "g6.xlarge", "-q", "fp4"],
            "unknown quantization 'fp4'",
        ),
        (["recommend", "-m", "qwen2.5-7b-instruct", "-i", "no-such-instance"], "Unknown instance type"),
        (["memory-breakdown", "-m", "no-such-model", "-i", "g6.xlarge"], "Unknown model 'no-such-model'"),
        (["sweep", "--base-url", "http://127.0.0.1:9", "--input-lens", "-5"], "--input-lens"),
        # a registered name, not a choice list: checked by the use case against the dataset registry
        (
            ["bench", "--base-url", "http://127.0.0.1:9", "--dataset", "jsnl"],
            "--dataset: Unknown dataset 'jsnl'",
        ),
        (["sweep", "--base-url", "http://127.0.0.1:9", "--dataset", "jsnl"], "Did you mean 'jsonl'?"),
        (["capacity", "--base-url", "http://127.0.0.1:9", "--dataset", "jsnl"], "Known: jsonl, random"),
        (["runs", "show", "no-such-run"], "no-such-run"),
        (["compare", "no-such-run", "other-run"], "no-such-run"),
    ],
)
def test_a_bad_value_the_models_check_is_refused_in_words_with_exit_2(args: list[str], says: str) -> None:
    out = refused(args)
    assert says.lower() in out.lower(), out


def test_a_malformed_file_is_refused_with_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("- just\n- a list\n")
    assert "must hold a mapping" in refused(["run", str(spec), "--dry-run"])
    spec.write_text("model: {name: smollm2-135m-instruct}\nnot_a_key: 1\n")
    assert "not_a_key" in refused(["run", str(spec), "--dry-run"])
    result = tmp_path / "result.json"
    result.write_text("{not json")
    assert result.name in refused(["import", "vllm-bench", str(result), "--label", "x"])


class _Query(BaseModel):
    goal: str = Field("cost", pattern="^(cost|latency)$")
    instance_type: str | None = None
    think_time_s: float = Field(0.0, ge=0)
    input_lens: list[int] = []


def test_flag_error_names_the_flag_a_person_types() -> None:
    try:
        _Query.model_validate({"instance_type": 3, "think_time_s": -1, "input_lens": [1, "x"]})
    except ValidationError as exc:
        message = flag_error(exc, flags={"instance_type": "--instance"}).message
    assert message == (
        "--instance must be a valid string (got 3); --think-time must be at least 0 (got -1); "
        "--input-lens (item 2) must be a whole number (got 'x')."
    )
    assert plain_words({"type": "value_error", "msg": "Value error, unknown quantization 'fp4'"}) == (
        "unknown quantization 'fp4'"
    )
    assert plain_words(
        {"type": "literal_error", "ctx": {"expected": "'cost' or 'latency'"}, "input": "x"}
    ) == ("must be cost or latency (got 'x')")
