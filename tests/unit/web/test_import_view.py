"""What the Import page offers and what an imported run's page says: every tool `import` takes (vllm-bench
first) with the files it expects, an unknown tool said beside the tool field, and an imported run's cells and
own-named figures in the words `accelbench import` and `runs show` print."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.services.result_imports import ImportRequest, import_results
from accelbench.store import Store
from accelbench.web.import_view import cell_shape, import_form, imported_view

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'store.db'}")


def test_the_form_offers_every_tool_with_what_it_reads() -> None:
    form, errors = import_form(None, None)
    names = [t["name"] for t in form["tools"]]
    assert names[0] == "vllm-bench" and form["tool"] == "vllm-bench" and errors == {}
    assert {"guidellm", "aiperf", "inference-perf", "genai-bench", "llm-d-report"} <= set(names)
    assert "--save-result" in form["expected"]
    form, errors = import_form("aiperf", "  mine ")
    assert (form["tool"], form["label"], errors) == ("aiperf", "mine", {})
    assert form["expected"] == next(t["description"] for t in form["tools"] if t["name"] == "aiperf")


def test_an_unknown_tool_is_said_beside_the_tool_field() -> None:
    form, errors = import_form("guidelm", None)
    assert form["tool"] == "vllm-bench"
    assert errors["tool"].startswith(
        "Tool 'guidelm' is not one accelbench imports; choose one of vllm-bench, "
    )
    assert "guidellm" in errors["tool"]


def test_an_imported_run_says_what_was_made_of_its_files(store: Store) -> None:
    out = import_results(store, ImportRequest("guidellm", [DATA / "guidellm" / "benchmarks.json"], label="g"))
    run, results = store.get_run(out.run_id), store.get_results(out.run_id)
    view = imported_view(run, results)
    assert view is not None
    assert view["summary"] == f"Imported 1 file into run {run.id} (g): {', '.join(out.cells)}."
    assert cell_shape(results) == out.cells  # the same words the CLI and the API answer with
    assert view["files"] == ["benchmarks.json"] and view["source"].startswith("guidellm")
    kept = [line for line in view["figures"] if "kept under the tool's name" in line]
    assert any(line.startswith("time_per_output_token_ms (ms), kept under the tool's name, not directly comparable: ")
               for line in kept)  # fmt: skip


def test_vllm_files_say_how_their_lengths_were_grouped_and_a_measured_run_says_nothing(store: Store) -> None:
    files = sorted((DATA / "vllm_bench").glob("*.json"))
    out = import_results(store, ImportRequest("vllm-bench", files, label="v"))
    view = imported_view(store.get_run(out.run_id), store.get_results(out.run_id))
    assert view is not None and view["summary"].startswith(f"Imported {len(files)} files into run ")
    assert view["groups"] == out.notes
    measured = store.create_run(kind="run", label="here", model="m", target="local")
    assert imported_view(measured, []) is None
