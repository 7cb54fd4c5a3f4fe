"""The runs API against SQLite and a real PostgreSQL: queue (202, pending), the tier's runtime, every guard on
both sides, bad input (400/422 with what to change), list with filters and pagination, detail with results,
telemetry and findings, cancel, delete, CSV."""

from __future__ import annotations

import pytest

from accelbench.domain.run import RunStatus
from accelbench.store import Store
from tests.support.api_app import api_for, summary

SMALL = "smollm2-135m-instruct"
# Local runs name the CPU KV-cache budget themselves (the local target has no catalog row to plan from).
LOCAL = {"settings": {"kv_cache_space_gib": 1}}


@pytest.fixture
def api(store: Store):
    with api_for(store) as a:
        yield a


def post(api, spec: dict, **kw):
    return api.client.post("/api/v1/runs", json=spec, headers=api.auth, **kw)


def test_post_queues_a_pending_run(api) -> None:
    r = post(api, {"model": SMALL, "label": "first", "engine": LOCAL,
                   "sweep": {"input_lens": [128], "concurrency": [1]}})  # fmt: skip
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] == "pending"
    assert r.headers["location"] == f"/api/v1/runs/{body['id']}" == body["url"]
    assert body["engine"] == "vllm-cpu" and body["accelerator_type"] == "cpu"
    run = api.store.get_run(body["id"])
    assert run.status == RunStatus.pending and run.kind == "run" and run.label == "first"
    assert run.spec["sweep"]["input_lens"] == [128] and run.target == "local"
    detail = api.client.get(body["url"]).json()
    assert detail["run"]["status"] == "pending" and detail["results"] == [] and detail["findings"] == []


def test_a_run_spec_carries_a_load_plan_and_a_wrong_axis_is_a_400_that_says_what_to_change(api) -> None:
    plan = [{"duration_s": 30, "concurrency": 1}, {"duration_s": 60, "concurrency": 4, "ramp_up_s": 20}]
    r = post(api, {"model": SMALL, "engine": LOCAL, "sweep": {"input_lens": [128], "stages": plan}})
    assert r.status_code == 202, r.text
    sweep = api.store.get_run(r.json()["id"]).spec["sweep"]
    assert sweep["concurrency"] == [4] and [st["ramp_up_s"] for st in sweep["stages"]] == [0.0, 20.0]
    bad = post(api, {"model": SMALL, "engine": LOCAL, "sweep": {"stages": plan, "concurrency": [1, 2]}})
    assert bad.status_code in (400, 422) and "leave concurrency unset or give [4]" in bad.text, bad.text


@pytest.mark.parametrize(
    ("instance", "engine", "tier"),
    [("g6.2xlarge", "vllm", "gpu"), ("inf2.8xlarge", "vllm-neuron", "neuron"), ("m8i.2xlarge", "vllm-cpu", "cpu"),
     ("r8g.4xlarge", "vllm-cpu", "cpu"), (None, "vllm-cpu", "cpu")],
)  # fmt: skip
def test_runtime_follows_the_instance_tier(api, instance, engine, tier) -> None:
    # SmolLM2's 9 heads cannot be split over Neuron's power-of-two cores: a catalog instance gets a 7B model.
    spec: dict = {"model": SMALL, "engine": LOCAL} if instance is None else {"model": "qwen2.5-7b-instruct"}
    if instance:
        spec |= {"instance_type": instance, "target": {"kind": "kubernetes"}}
    r = post(api, spec)
    assert r.status_code == 202, r.text
    assert (r.json()["engine"], r.json()["accelerator_type"]) == (engine, tier)
    assert api.store.get_run(r.json()["id"]).spec["engine"]["name"] == engine


def test_an_explicit_runtime_is_kept(api) -> None:
    r = post(api, {"model": SMALL, "engine": {"name": "sglang"}, "instance_type": "g6.2xlarge",
                   "target": {"kind": "kubernetes"}})  # fmt: skip
    assert r.status_code == 202, r.text
    assert r.json()["engine"] == "sglang"


# Each CPU guard: refused with 400 on a CPU instance (nothing stored), and the same settings accepted on GPU.
GUARDS = [
    ("kv_cache_dtype", {"kv_cache_dtype": "fp8"}, "qwen2.5-7b-instruct", "m8i.4xlarge", "g6e.xlarge", "kv_cache_dtype"),
    ("distributed", {"deployment_mode": "distributed"}, "qwen2.5-7b-instruct", "m8i.4xlarge", "g6e.xlarge", "deployment_mode"),
    ("disaggregated", {"deployment_mode": "disaggregated"}, "qwen2.5-7b-instruct", "r8g.4xlarge", "g6e.xlarge", "deployment_mode"),
    ("tp_above_numa", {"tensor_parallel_size": 2}, "qwen2.5-7b-instruct", "r8g.4xlarge", "g6.12xlarge", "NUMA"),
    ("dense_above_13b", {}, "qwen2.5-32b-instruct", "r8g.16xlarge", "p5.48xlarge", "ceiling"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "settings", "model", "cpu", "gpu", "says"), GUARDS, ids=[g[0] for g in GUARDS]
)
def test_guard_refuses_on_cpu_and_passes_on_gpu(api, name, settings, model, cpu, gpu, says) -> None:
    spec = {"model": model, "engine": {"settings": settings}, "target": {"kind": "kubernetes"}}
    r = post(api, spec | {"instance_type": cpu})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "GuardError"
    assert says in err["message"]
    assert api.store.list_runs()[1] == 0  # refused before anything was queued
    ok = post(api, spec | {"instance_type": gpu})
    assert ok.status_code == 202, ok.text
    assert ok.json()["engine"] == "vllm"


def test_dense_ceiling_passes_on_cpu_when_quantized(api) -> None:
    spec = {"model": "qwen2.5-32b-instruct", "instance_type": "r8g.16xlarge", "target": {"kind": "kubernetes"},
            "engine": {"settings": {"quantization": "int8"}}}  # fmt: skip
    r = post(api, spec)
    assert r.status_code == 202, r.text


def test_moe_model_is_not_held_to_the_dense_ceiling(api) -> None:
    r = post(api, {"model": "mixtral-8x7b-instruct-v0.1", "instance_type": "r8g.48xlarge",
                   "target": {"kind": "kubernetes"}})  # fmt: skip
    assert r.status_code == 202, r.text


@pytest.mark.parametrize(
    ("spec", "says", "hint"),
    [({"model": "qwen2.5-72b-instruct", "instance_type": "g6.xlarge"}, "does not fit g6.xlarge", "larger instance"),
     ({"model": "qwen2.5-72b-instruct", "instance_type": "g6.xlarge", "engine": {"settings": {"quantization": "int4"}}},
      "in any of: int4", "Leave quantization unset"),
     ({"model": SMALL, "instance_type": "inf2.xlarge"}, "divides 9 heads", "more NeuronCores")],
)  # fmt: skip
def test_a_model_that_cannot_fit_is_refused_with_the_planners_reason(api, spec, says, hint) -> None:
    r = post(api, spec | {"target": {"kind": "kubernetes"}})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "GuardError" and says in err["message"] and hint in err["hint"]
    assert api.store.list_runs()[1] == 0


def test_runtime_on_the_wrong_tier_is_refused(api) -> None:
    r = post(api, {"model": SMALL, "instance_type": "m8i.2xlarge", "engine": {"name": "vllm"},
                   "target": {"kind": "kubernetes"}})  # fmt: skip
    assert r.status_code == 400
    assert "cpu" in r.json()["error"]["message"]


def test_several_guard_failures_are_listed_together(api) -> None:
    r = post(api, {"model": SMALL, "instance_type": "r8g.4xlarge", "target": {"kind": "kubernetes"},
                   "engine": {"settings": {"kv_cache_dtype": "fp8", "deployment_mode": "distributed"}}})  # fmt: skip
    assert r.status_code == 400
    msg = r.json()["error"]["message"]
    assert "kv_cache_dtype" in msg and "deployment_mode" in msg


@pytest.mark.parametrize(
    ("spec", "status", "says"),
    [
        ({"model": SMALL, "instance_type": "g6.2xlarg", "target": {"kind": "kubernetes"}}, 400, "g6.2xlarge"),
        ({"model": SMALL, "engine": {"name": "vllm-cpuu"}}, 400, "vllm-cpu"),
        ({"model": SMALL, "target": {"kind": "kubernetes"}}, 400, "instance_type"),
        ({"model": SMALL, "concurency": [1]}, 422, "concurency"),
        ({"model": SMALL, "sweep": {"concurrency": [0]}}, 422, "sweep.concurrency"),
        ({"model": SMALL, "sweep": {"repeats": 0}}, 422, "repeats"),
        ({"label": "no model"}, 422, "body 'model': required"),
        ({"model": "   "}, 422, "model must not be empty"),
        ({"model": SMALL, "target": {"kind": "moon"}}, 422, "target"),
    ],
)
def test_bad_specs_say_what_to_change(api, spec, status, says) -> None:
    r = post(api, spec)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert says in err["message"], err
    assert err["type"] in ("UserInputError", "ValidationError", "NotFoundError", "GuardError")
    assert api.store.list_runs()[1] == 0


def test_malformed_json_body_is_422(api) -> None:
    r = api.client.post(
        "/api/v1/runs", content=b"{not json", headers=api.auth | {"content-type": "application/json"}
    )
    assert r.status_code == 422
    assert "JSON" in r.json()["error"]["message"]


def _seed(store: Store) -> dict[str, str]:
    ids = {}
    a = store.create_run(kind="sweep", label="cpu-a", model="smollm2", engine="vllm-cpu", instance_type="m8i.2xlarge",
                         accelerator_type="cpu", status=RunStatus.completed)  # fmt: skip
    for il, c in [(128, 1), (128, 4), (512, 1), (512, 4)]:
        store.save_result(a.id, input_len=il, concurrency=c, repeat=0, summary=summary(il, c, tpot=20 + c))
    ids["a"] = a.id
    b = store.create_run(kind="run", label="gpu-b", model="qwen", engine="vllm", instance_type="g6.2xlarge",
                         accelerator_type="gpu", status=RunStatus.failed)  # fmt: skip
    ids["b"] = b.id
    c = store.create_run(kind="run", label="cpu-c", model="smollm2", engine="llamacpp", accelerator_type="cpu",
                         target="local", status=RunStatus.benchmarking)  # fmt: skip
    ids["c"] = c.id
    return ids


def test_list_filters_and_pagination(api) -> None:
    ids = _seed(api.store)
    get = lambda **q: api.client.get("/api/v1/runs", params=q)  # noqa: E731
    body = get().json()
    assert body["total"] == 3 and [r["id"] for r in body["items"]] == [ids["c"], ids["b"], ids["a"]]
    assert body["items"][2]["completed_requests"] == 16 and body["items"][2]["cells"] == 4
    assert [r["id"] for r in get(status="completed").json()["items"]] == [ids["a"]]
    assert {r["id"] for r in get(status=["completed", "failed"]).json()["items"]} == {ids["a"], ids["b"]}
    assert {r["id"] for r in get(model="smol").json()["items"]} == {ids["a"], ids["c"]}
    assert [r["id"] for r in get(instance_type="g6.2xlarge").json()["items"]] == [ids["b"]]
    assert {r["id"] for r in get(accelerator_type="cpu").json()["items"]} == {ids["a"], ids["c"]}
    assert [r["id"] for r in get(engine="llamacpp").json()["items"]] == [ids["c"]]
    assert [r["id"] for r in get(label="gpu").json()["items"]] == [ids["b"]]
    assert [r["id"] for r in get(kind="sweep").json()["items"]] == [ids["a"]]
    page = get(limit=2, offset=1).json()
    assert (page["total"], page["limit"], page["offset"]) == (3, 2, 1)
    assert [r["id"] for r in page["items"]] == [ids["b"], ids["a"]]
    assert get(offset=10).json()["items"] == []


@pytest.mark.parametrize(
    ("query", "says"),
    [({"limit": 0}, "limit"), ({"limit": 501}, "limit"), ({"offset": -1}, "offset"),
     ({"status": "done"}, "status"), ({"accelerator_type": "tpu"}, "accelerator_type")],
)  # fmt: skip
def test_list_rejects_bad_parameters(api, query, says) -> None:
    r = api.client.get("/api/v1/runs", params=query)
    assert r.status_code == 422
    assert f"query parameter '{says}'" in r.json()["error"]["message"]


def test_detail_has_results_cells_telemetry_and_findings(api) -> None:
    ids = _seed(api.store)
    d = api.client.get(f"/api/v1/runs/{ids['a']}").json()
    assert d["run"]["id"] == ids["a"] and d["run"]["status"] == "completed"
    assert [(r["input_len"], r["concurrency"]) for r in d["results"]] == [
        (128, 1),
        (128, 4),
        (512, 1),
        (512, 4),
    ]
    assert d["results"][1]["tpot_p50_ms"] == 24.0
    assert len(d["cells"]) == 4 and d["cells"][0]["tpot_p50_ms"]["mean"] == 21.0
    assert d["telemetry"]["total"] == 16 and len(d["telemetry"]["samples"]) == 16
    assert "vllm:kv_cache_usage_perc" in d["telemetry"]["metrics"]
    assert d["findings"] and all(f["text"] for f in d["findings"])
    # TPOT grows from 21 ms at concurrency 1 to 24 ms at 4: the finding quotes computed figures.
    assert any("TPOT" in f["text"] for f in d["findings"])
    thin = api.client.get(f"/api/v1/runs/{ids['a']}", params={"max_points": 10}).json()
    assert thin["telemetry"]["total"] == 16 and len(thin["telemetry"]["samples"]) == 10
    assert api.client.get(f"/api/v1/runs/{ids['a'][:12]}").json()["run"]["id"] == ids["a"]


def test_detail_of_unknown_and_ambiguous_ids(api) -> None:
    _seed(api.store)
    r = api.client.get("/api/v1/runs/20000101-ffffff")
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFoundError"
    day = api.store.list_runs()[0][0].id.split("-")[0]
    r = api.client.get(f"/api/v1/runs/{day}")
    assert r.status_code == 400 and "ambiguous" in r.json()["error"]["message"]


def test_cancel(api) -> None:
    pending = post(api, {"model": SMALL, "engine": LOCAL}).json()["id"]
    r = api.client.post(f"/api/v1/runs/{pending}/cancel", headers=api.auth)
    assert r.status_code == 202 and r.json() == {"id": pending, "status": "cancelled", "signalled": False}
    assert api.store.get_run(pending).status == RunStatus.cancelled
    again = api.client.post(f"/api/v1/runs/{pending}/cancel", headers=api.auth)
    assert again.status_code == 409 and "already cancelled" in again.json()["error"]["message"]
    ids = _seed(api.store)
    running = api.client.post(f"/api/v1/runs/{ids['c']}/cancel", headers=api.auth)
    assert running.status_code == 202 and running.json()["status"] == "cancelled"
    assert api.client.post("/api/v1/runs/20000101-ffffff/cancel", headers=api.auth).status_code == 404


def test_delete(api) -> None:
    ids = _seed(api.store)
    running = api.client.delete(f"/api/v1/runs/{ids['c']}", headers=api.auth)
    assert running.status_code == 409 and "cancel it first" in running.json()["error"]["message"]
    r = api.client.delete(f"/api/v1/runs/{ids['a']}", headers=api.auth)
    assert r.status_code == 204 and r.content == b""
    assert api.client.get(f"/api/v1/runs/{ids['a']}").status_code == 404
    assert api.store.get_results  # results went with it:
    assert api.client.get("/api/v1/runs", params={"kind": "sweep"}).json()["total"] == 0
    pending = post(api, {"model": SMALL, "engine": LOCAL}).json()["id"]
    assert api.client.delete(f"/api/v1/runs/{pending}", headers=api.auth).status_code == 204
    assert api.client.delete(f"/api/v1/runs/{pending}", headers=api.auth).status_code == 404


def test_results_csv(api) -> None:
    ids = _seed(api.store)
    r = api.client.get(f"/api/v1/runs/{ids['a']}/results.csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    lines = r.text.strip().splitlines()
    assert lines[0].startswith("run_id,input_len,concurrency") and len(lines) == 5
    assert lines[1].split(",")[:3] == [ids["a"], "128", "1"]


def test_a_lone_surrogate_is_a_clear_400_and_never_breaks_the_listing(api) -> None:
    """A lone UTF-16 surrogate ("\\ud800") in a string gave 500; stored in a JSON column on SQLite it then broke
    GET /api/v1/runs for everyone until that run was deleted."""
    body = (
        '{"model": "' + SMALL + '", "label": "x\\ud800y", "engine": {"settings": {"kv_cache_space_gib": 1}}}'
    )
    r = api.client.post(
        "/api/v1/runs", content=body, headers={**api.auth, "Content-Type": "application/json"}
    )
    assert r.status_code == 400, r.text
    assert "surrogate" in r.json()["error"]["message"] and "label" in r.json()["error"]["message"]
    assert api.store.list_runs()[1] == 0
    if api.store.is_postgres:
        return  # PostgreSQL's JSONB refuses the surrogate when it is stored; SQLite keeps it
    # one stored in a JSON column some other way (an import, an older version) is still served, escaped
    old = api.store.create_run(kind="bench", label="old", model="m", extra={"note": "old\ud800run"})
    assert api.client.get("/api/v1/runs").status_code == 200
    detail = api.client.get(f"/api/v1/runs/{old.id}")
    assert detail.status_code == 200 and detail.json()["run"]["extra"]["note"] == "old\ud800run"


@pytest.mark.parametrize(
    ("sweep", "says"),
    [
        ({"concurrency": [10**9]}, "4,096"),
        ({"concurrency": [2**64]}, "4,096"),
        ({"num_warmups": 10**9}, "1000"),
        ({"output_len": 10**9}, "1048576"),
        ({"input_lens": list(range(1, 1001)), "concurrency": list(range(1, 1001))}, "at most 64"),
        ({"input_lens": [100_000], "concurrency": [1000], "prompts_per_concurrency": 10}, "50,000,000"),
    ],
)
def test_sweep_sizes_are_bounded_and_the_bound_is_in_the_message(api, sweep: dict, says: str) -> None:
    """POST /runs accepted concurrency 10^9 (even 2^64), 10^9 warm-ups, a 10^6-cell matrix and output length
    10^9; the worker then built every prompt up front until memory ran out, the queue blocked behind it."""
    r = post(api, {"model": SMALL, "engine": LOCAL, "sweep": sweep})
    assert r.status_code == 422, r.text  # the API's status for a body that fails its schema
    assert says in r.text
    assert api.store.list_runs()[1] == 0


def test_a_store_outage_is_a_503_that_says_so_not_a_500_bug(api, monkeypatch) -> None:
    """SQLite disk full or a corrupted page answered 500 "a bug in accelbench" while /health said ok."""
    from sqlalchemy.exc import OperationalError

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OperationalError("SELECT runs", {}, Exception("database disk image is malformed"))

    monkeypatch.setattr(Store, "list_runs", broken)
    r = api.client.get("/api/v1/runs")
    assert r.status_code == 503 and r.headers["Retry-After"]
    err = r.json()["error"]
    assert err["type"] == "StorageError" and "malformed" in err["message"] and "bug" not in err["hint"]


def test_bodies_strings_and_lists_have_size_limits(api) -> None:
    """A 50 MB label was stored, and every list response then carried it."""
    big = post(api, {"model": SMALL, "engine": LOCAL, "label": "x" * 2_000_000})
    assert big.status_code == 413 and "1,048,576" in big.json()["error"]["message"]
    long_label = post(api, {"model": SMALL, "engine": LOCAL, "label": "x" * 201})
    assert long_label.status_code == 422 and "label" in long_label.text and "200" in long_label.text
    many = post(
        api, {"model": SMALL, "engine": {"settings": {"kv_cache_space_gib": 1, "extra_args": ["--x"] * 65}}}
    )
    assert many.status_code == 422 and "extra_args" in many.text
    assert api.store.list_runs()[1] == 0


def test_secret_arguments_and_variables_are_served_masked(api) -> None:
    """`--api-key ...` in extra_args was returned unmasked (the variables were masked by another rule)."""
    settings = {
        "kv_cache_space_gib": 1,
        "extra_args": ["--api-key", "sekrit-arg"],
        "env": {"MY_TOKEN": "sekrit-env"},
    }
    r = post(api, {"model": SMALL, "engine": {"settings": settings}})
    assert r.status_code == 202, r.text
    for path in (f"/api/v1/runs/{r.json()['id']}", "/api/v1/runs"):
        text = api.client.get(path).text
        assert "sekrit" not in text and "***" in text


def test_paths_from_api_callers_stay_inside_the_models_and_datasets_directories(
    api, tmp_path, monkeypatch
) -> None:
    """dataset_path worked as an existence and readability oracle and sent a readable file's lines to a URL of
    the caller's choice; anonymous GET /api/v1/models/{path} stat'ed any path and returned any model-shaped
    config.json."""
    import json as _json
    from urllib.parse import quote

    from accelbench.settings import get_settings, reset_settings_cache

    monkeypatch.delenv("ACCELBENCH_API_PATH_ROOTS")  # only the service's own directories
    reset_settings_cache()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.json").write_text(_json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                                      "hidden_size": 64, "num_hidden_layers": 2,
                                                      "num_attention_heads": 2, "vocab_size": 100}))  # fmt: skip
    secret = outside / "passwords.jsonl"
    secret.write_text('{"prompt": "hunter2"}\n')
    for path in (str(outside), "../" * 8 + str(outside).lstrip("/")):
        r = api.client.get("/api/v1/models/" + quote(path, safe=""))
        assert r.status_code == 400 and "outside" in r.json()["error"]["message"], r.text
    body = {"model": SMALL, "engine": LOCAL, "target": {"kind": "endpoint", "base_url": "http://203.0.113.9"},
            "sweep": {"dataset": "jsonl", "dataset_path": str(secret)}}  # fmt: skip
    for params in ({}, {"dry_run": "true"}):
        r = post(api, body, params=params)
        assert r.status_code == 400 and "sweep.dataset_path" in r.text, r.text
    tools = outside / "tools.json"
    tools.write_text('[{"type": "function", "function": {"name": "hunter2"}}]')
    r = post(api, {**body, "sweep": {"tools": str(tools)}}, params={"dry_run": "true"})
    assert r.status_code == 400 and "sweep.tools" in r.text, r.text  # a tools file is read like a dataset
    r = api.client.get("/api/v1/estimate", params={"model": str(outside), "instance_type": "g6.2xlarge"})
    assert r.status_code == 400
    assert api.store.list_runs()[1] == 0
    # a file in the datasets directory is fine
    datasets = get_settings().datasets_dir
    datasets.mkdir(parents=True, exist_ok=True)
    (datasets / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    ok = post(api, {**body, "sweep": {"dataset": "jsonl", "dataset_path": str(datasets / "prompts.jsonl")}},
              params={"dry_run": "true"})  # fmt: skip
    assert ok.status_code == 200, ok.text
