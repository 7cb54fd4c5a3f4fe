"""Like for like: differences of what runs served said in words, unknowns never counted, quality by interval."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from accelbench.domain.results import RunInfo
from accelbench.domain.run import RunStatus
from accelbench.report.like_for_like import like_for_like


def served(**fields: Any) -> dict[str, Any]:
    return {k: {"value": v, "source": "test"} for k, v in fields.items()}


def run(run_id: str, *, quantization: str | None = None, model: str = "smol", **extra: Any) -> RunInfo:
    return RunInfo(
        id=run_id,
        kind="sweep",
        status=RunStatus.completed,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        model=model,
        quantization=quantization,
        extra=extra,
    )


def probe(correct: int, lo: float, hi: float, answers: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {"source": "probe", "probe_version": 1, "seed": 0, "tasks": 24, "api": "chat", "max_tokens": 12,
            "agreement_unit": "tokens", "correct": correct, "accuracy": correct / 24, "accuracy_ci95": [lo, hi],
            "answers": answers or {"a": ["1", "2"], "b": ["x"]}}  # fmt: skip


def test_same_settings_are_like_for_like() -> None:
    same = served(
        max_model_len=2048, weights_dtype="bf16", kv_cache_dtype="auto", sampling={"temperature": 0}
    )
    verdict = like_for_like([run("A", served=same), run("B", served=same)], ["A", "B"])
    assert verdict["like_for_like"] is True and verdict["mismatches"] == []


def test_precision_and_max_length_are_said_in_words() -> None:
    a = run("A", served=served(max_model_len=32768, weights_dtype="bf16"))
    b = run("B", served=served(max_model_len=4096, quantization="fp8", weights_dtype="bf16"))
    verdict = like_for_like([a, b], ["A", "B"])
    assert verdict["like_for_like"] is False
    texts = [m["text"] for m in verdict["mismatches"]]
    assert "B serves fp8 weights, A bf16" in texts
    assert "B's max model length is 4,096, A's 32,768" in texts
    assert {(m["run"], m["field"], m["baseline"], m["value"]) for m in verdict["mismatches"]} == {
        ("B", "weights_precision", "bf16", "fp8"),
        ("B", "max_model_len", 32768, 4096),
    }
    assert verdict["notes"][0].startswith("Not like for like: ")


def test_the_run_record_precision_counts_and_unknown_is_not_a_difference() -> None:
    a = run("A", quantization="GGUF Q4_1", served=served(max_model_len=2048))
    b = run("B", quantization="bf16", served=served())  # B's max length unknown
    verdict = like_for_like([a, b], ["A", "B"])
    assert [m["field"] for m in verdict["mismatches"]] == ["weights_precision"]
    assert any("Not verified" in n and "B's max model length" in n for n in verdict["notes"])


def test_model_identity_by_hash_else_name() -> None:
    a = run("A", model="/models/smol", served=served(config_hash="aaa", tokenizer_hash="t"))
    b = run("B", model="smol-alias", served=served(config_hash="aaa", tokenizer_hash="t"))
    assert like_for_like([a, b], ["A", "B"])["like_for_like"] is True  # same files, other names
    c = run("C", model="other", served=served(config_hash="ccc", tokenizer_hash="t"))
    found = like_for_like([a, c], ["A", "C"])["mismatches"]
    assert [m["field"] for m in found] == ["config_hash"]
    d, e = run("D", model="smol"), run("E", model="llama")
    assert like_for_like([d, e], ["D", "E"])["mismatches"][0]["text"] == "E serves llama, D smol"


def test_quality_counts_only_when_the_intervals_do_not_overlap() -> None:
    good = run("A", quality=probe(20, 0.64, 0.93))
    close = run("B", quality=probe(16, 0.47, 0.82))
    poor = run("C", quality=probe(2, 0.02, 0.26, {"a": ["9"], "b": ["x"]}))
    assert like_for_like([good, close], ["A", "B"])["like_for_like"] is True
    verdict = like_for_like([good, poor], ["A", "C"])
    assert [m["field"] for m in verdict["mismatches"]] == ["quality"]
    assert "the intervals do not overlap" in verdict["mismatches"][0]["text"]
    assert verdict["agreement"] == {"C": 0.5}  # b agrees fully, a not at all
    assert like_for_like([good, close], ["A", "B"])["agreement"] == {"B": 1.0}


def test_a_comparison_leaves_a_mismatched_run_out_of_its_ratios_unless_allowed() -> None:
    from accelbench.report.compare_runs import build_comparison
    from accelbench.report.like_for_like import like_for_like_lines
    from tests.support.report_data import make_result, make_run, run_data

    def data(run_id: str, max_len: int) -> Any:
        r = make_run(run_id, model="smol")
        r.extra = {"served": served(max_model_len=max_len)}
        return run_data(r, [make_result(run_id, 128, c, tpot=20.0 + c, total_tps=50.0 * c) for c in (1, 4)])

    a, b = data("A", 2048), data("B", 4096)
    strict = build_comparison([a, b])
    assert strict.like_for_like is False and strict.pairs == []
    assert strict.mismatches[0]["field"] == "max_model_len"
    assert not [f for f in strict.findings if f.kind == "decode_speedup"]
    lines = like_for_like_lines(strict)
    assert lines[0].startswith("Like for like: no") and any("Left out of the ratios" in n for n in lines)
    allowed = build_comparison([a, b], allow_mismatch=True)
    assert allowed.pairs and allowed.like_for_like is False
    same = build_comparison([a, data("C", 2048)])
    assert same.like_for_like is True and same.pairs


def test_the_compare_csv_says_it_in_its_header_and_on_every_row() -> None:
    from accelbench.report.compare_csv import read_compare_csv, write_compare_csv
    from accelbench.report.compare_runs import build_comparison
    from tests.support.report_data import make_result, make_run, run_data

    def data(run_id: str, dtype: str) -> Any:
        r = make_run(run_id, model="smol")
        r.extra = {"served": served(weights_dtype=dtype)}
        return run_data(r, [make_result(run_id, 128, 1, tpot=20.0, total_tps=50.0)])

    comments, rows = read_compare_csv(
        write_compare_csv(build_comparison([data("A", "bf16"), data("B", "fp16")]))
    )
    assert "# Like for like: no, 1 difference(s) from the baseline." in comments
    assert [r["like_for_like"] for r in rows] == ["baseline", "B serves fp16 weights, A bf16"]
    _, same = read_compare_csv(write_compare_csv(build_comparison([data("A", "bf16"), data("C", "bf16")])))
    assert "like_for_like" not in same[0]


def test_the_report_says_it_in_html_and_markdown() -> None:
    from accelbench.report.document import build_report
    from accelbench.report.html import render_html
    from accelbench.report.markdown import render_markdown
    from tests.support.report_data import make_result, make_run, run_data

    def data(run_id: str, max_len: int) -> Any:
        r = make_run(run_id, model="smol")
        r.extra = {"served": served(max_model_len=max_len)}
        return run_data(r, [make_result(run_id, 128, 1, tpot=20.0, total_tps=50.0)])

    report = build_report([data("A", 2048), data("B", 1024)])  # type: ignore[list-item]
    html = render_html(report)
    assert 'id="like-for-like"' in html and "Like for like: no" in html
    assert (
        "B&#39;s max model length is 1,024, A&#39;s 2,048" in html or "B's max model length is 1,024" in html
    )
    md = render_markdown(report, {})
    assert "## Like for like" in md and "max model length is 1,024" in md


def test_the_headline_does_not_rank_a_mismatched_run() -> None:
    from accelbench.report.document import build_report
    from tests.support.report_data import make_result, make_run, run_data

    def data(run_id: str, dtype: str, tps: float) -> Any:
        r = make_run(run_id, model="smol")
        r.extra = {"served": served(weights_dtype=dtype)}
        return run_data(r, [make_result(run_id, 128, 1, tpot=20.0, total_tps=tps, output_tps=tps)])

    strict = build_report([data("A", "bf16", 50.0), data("B", "fp8", 500.0)])  # type: ignore[list-item]
    assert strict.comparison.left_out == ["B"] and "left_out" not in strict.comparison.model_dump(mode="json")
    assert not [r for r in strict.headline.ratios if "B" in r.sentence]
    assert "50.0 output tok/s" in strict.headline.title  # the faster B serves other weights: not ranked
