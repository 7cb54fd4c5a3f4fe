"""Compare (JSON and CSV), a run's HTML report and its manifests export, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import re

import pytest
import yaml

from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.support.api_app import api_for, summary


@pytest.fixture
def api(store: Store):
    with api_for(store) as a:
        yield a


def two_runs(store: Store) -> tuple[str, str]:
    a = store.create_run(kind="run", label="cpu", model="smollm2", engine="vllm-cpu", instance_type="m8i.2xlarge",
                         accelerator_type="cpu", accelerator_count=0, status=RunStatus.completed)  # fmt: skip
    b = store.create_run(kind="run", label="gpu", model="smollm2", engine="vllm", instance_type="g6.2xlarge",
                         accelerator_type="gpu", accelerator_name="L4", accelerator_count=1,
                         status=RunStatus.completed)  # fmt: skip
    for c in (1, 4):
        store.save_result(
            a.id, input_len=128, concurrency=c, repeat=0, summary=summary(128, c, tpot=30.0 + 5 * c)
        )
        store.save_result(
            b.id, input_len=128, concurrency=c, repeat=0, summary=summary(128, c, tpot=10.0 + c)
        )
    return a.id, b.id


def test_compare_json(api) -> None:
    a, b = two_runs(api.store)
    r = api.client.get("/api/v1/compare", params={"runs": [a, b]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["baseline"] == a and [x["id"] for x in body["runs"]] == [a, b]
    assert body["matched"] == [[128, 1], [128, 4]]
    pair = body["pairs"][0]
    # decode speed-up of a over b at concurrency 1: 11 ms / 35 ms TPOT, computed from the stored figures
    assert pair["tpot_a_ms"] == 35.0 and pair["tpot_b_ms"] == 11.0
    assert pair["decode_speedup_a_over_b"] == pytest.approx(11.0 / 35.0)
    assert body["findings"] and all(f["text"] for f in body["findings"])


def test_compare_csv(api) -> None:
    a, b = two_runs(api.store)
    r = api.client.get("/api/v1/compare", params={"runs": [a, b], "format": "csv", "tier": "on_demand"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    lines = r.text.splitlines()
    assert lines[0].startswith("#")
    rows = list(csv.DictReader(io.StringIO("\n".join(x for x in lines if not x.startswith("#")))))
    assert {(row["run_id"], row["concurrency"]) for row in rows} == {(a, "1"), (a, "4"), (b, "1"), (b, "4")}
    cpu_row = next(row for row in rows if row["run_id"] == a)
    assert (
        cpu_row["throughput_per_accelerator_tok_s"] == ""
    )  # CPU: no accelerator count, never divided by zero


@pytest.mark.parametrize(
    ("params", "status", "says"),
    [({"runs": ["x"]}, 422, "runs"), ({}, 422, "'runs': required"),
     ({"runs": ["20000101-aaaaaa", "20000101-bbbbbb"]}, 404, "No run"),
     ({"runs": ["a", "b"], "format": "xml"}, 422, "format"), ({"runs": ["a", "b"], "tier": "spot"}, 422, "tier")],
)  # fmt: skip
def test_compare_bad_input(api, params, status, says) -> None:
    r = api.client.get("/api/v1/compare", params=params)
    assert r.status_code == status
    assert says in r.json()["error"]["message"]


def test_report_is_self_contained_html(api) -> None:
    a, _ = two_runs(api.store)
    r = api.client.get(f"/api/v1/runs/{a}/report")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    assert a in html and "<script" in html
    # nothing is fetched from elsewhere: no external script, stylesheet or image
    assert not re.search(r'<(script|img|iframe)[^>]+src="(https?:)?//', html)
    assert not re.search(r'<link[^>]+href="(https?:)?//', html)
    assert api.client.get("/api/v1/runs/20000101-aaaaaa/report").status_code == 404


def test_export_manifests(api) -> None:
    spec = {"model": "qwen2.5-7b-instruct", "instance_type": "r8g.4xlarge", "target": {"kind": "kubernetes"}}
    run_id = api.client.post("/api/v1/runs", json=spec, headers=api.auth).json()["id"]
    r = api.client.get(f"/api/v1/runs/{run_id}/export")
    assert r.status_code == 200, r.text
    files = r.json()["files"]
    engine = next(text for name, text in files.items() if "engine" in name)
    objs = list(yaml.safe_load_all(engine))
    dep = next(o for o in objs if o["kind"] == "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["kubernetes.io/arch"] == "arm64"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert "VLLM_CPU_KVCACHE_SPACE" in env
    assert "nvidia.com/gpu" not in engine
    stream = api.client.get(f"/api/v1/runs/{run_id}/export", params={"format": "yaml"})
    assert stream.status_code == 200 and stream.headers["content-type"].startswith("application/yaml")
    assert [d for d in yaml.safe_load_all(stream.text) if d and d.get("kind") == "Deployment"]
    local = api.client.post("/api/v1/runs", headers=api.auth,
                            json={"model": "smollm2-135m-instruct", "engine": {"settings": {"kv_cache_space_gib": 1}}})  # fmt: skip
    r = api.client.get(f"/api/v1/runs/{local.json()['id']}/export")
    assert r.status_code == 400 and "instance type" in r.json()["error"]["message"]


def capacity_runs(store: Store) -> tuple[str, str, str]:
    """Two capacity searches (g6.2xlarge 24 users, m8i.2xlarge 3 users at p90 TPOT <= 50 ms) and a sweep."""
    from tests.unit.report.capacity_data import G6, M8I, store_capacity_run

    g6 = store_capacity_run(store, G6, label="gpu", instance_type="g6.2xlarge", knee=24, predicted=20)
    m8i = store_capacity_run(store, M8I, label="cpu", instance_type="m8i.2xlarge", engine="vllm-cpu", knee=4)
    sweep, _ = two_runs(store)
    return g6, m8i, sweep


def _usd_per_million(instance: str, tokens_per_s: float) -> float:
    from accelbench.catalog import price_for

    return price_for(instance).usd_per_hour / tokens_per_s / 3600 * 1e6  # type: ignore[union-attr]


def test_compare_capacity_json_and_csv(api) -> None:
    g6, m8i, sweep = capacity_runs(api.store)
    body = api.client.get("/api/v1/compare", params={"runs": [g6, m8i, sweep]}).json()
    a, b = body["capacity"]
    assert (a["run_id"], a["max_load"], a["output_tokens_per_s_at_max"]) == (g6, 24, 662.0)
    assert a["usd_per_million_output_tokens"] == pytest.approx(_usd_per_million("g6.2xlarge", 662))
    assert a["usd_per_million_total_tokens"] == pytest.approx(_usd_per_million("g6.2xlarge", 1330))
    assert (b["run_id"], b["max_load"]) == (m8i, 3)
    finding = body["findings"][0]
    assert finding["kind"] == "capacity" and finding["text"].startswith(
        "At p90 TPOT <= 50 ms, g6.2xlarge sustains 24 users at $"
    )
    assert "capacity" not in api.client.get("/api/v1/compare", params={"runs": two_runs(api.store)}).json()

    r = api.client.get("/api/v1/compare", params={"runs": [g6, m8i, sweep], "format": "csv"})
    rows = list(
        csv.DictReader(io.StringIO("\n".join(x for x in r.text.splitlines() if not x.startswith("#"))))
    )
    row = next(x for x in rows if x["run_id"] == g6)
    assert row["capacity_max_load"] == "24" and row["capacity_slo"] == "p90 TPOT <= 50 ms"
    assert float(row["capacity_usd_per_1m_output_tokens"]) == pytest.approx(
        _usd_per_million("g6.2xlarge", 662)
    )
    assert next(x for x in rows if x["run_id"] == sweep)["capacity_max_load"] == ""


def test_compare_page_shows_capacity(api) -> None:
    g6, m8i, sweep = capacity_runs(api.store)
    r = api.client.get("/compare", params={"runs": [g6, m8i, sweep]})
    assert r.status_code == 200, r.text
    page = r.text
    table = page[page.index('id="capacity"') : page.index("</table>", page.index('id="capacity"'))]
    assert (
        "<td>24 users</td>" in table and "<td>3 users</td>" in table and "<td>20 users (-17%)</td>" in table
    )
    assert 'id="chart-capacity"' in page and 'id="capacity-chart-data"' in page
    assert '<script src="/static/compare.js"></script>' in page
    assert "g6.2xlarge sustains 24 users" in page
    assert api.client.get("/static/compare.js").status_code == 200
    plain = api.client.get("/compare", params={"runs": list(two_runs(api.store))}).text
    assert 'id="capacity"' not in plain and 'id="chart-capacity"' not in plain
