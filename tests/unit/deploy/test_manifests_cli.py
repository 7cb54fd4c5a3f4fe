"""``accelbench export`` and ``accelbench loadgen`` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.deploy.manifests import validate_objects
from accelbench.deploy.shards import decode_results
from tests.support.crd import crd_errors

runner = CliRunner(env={"COLUMNS": "200"})
MODEL = "Qwen/Qwen2.5-7B-Instruct"


def test_export_writes_valid_files(tmp_path: Path) -> None:
    out = tmp_path / "m"
    res = runner.invoke(
        app,
        [
            "export",
            "-m",
            MODEL,
            "-i",
            "r8g.4xlarge",
            "-o",
            str(out),
            "--karpenter",
            "--shards",
            "3",
            "--namespace",
            "lab",
            "--format",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["image"] == "vllm/vllm-openai-cpu:v0.32.0-arm64"
    assert data["env"]["VLLM_CPU_KVCACHE_SPACE"] == "41"
    assert sorted(p.name for p in out.iterdir()) == [
        "00-karpenter.yaml",
        "01-engine.yaml",
        "02-loadgen.yaml",
        "plan.json",
    ]
    docs = [d for f in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    validate_objects(docs)
    assert all(crd_errors(d) == [] for d in docs if d["kind"] in ("NodePool", "EC2NodeClass"))
    job = next(d for d in docs if d["kind"] == "Job")
    assert job["metadata"]["namespace"] == "lab" and job["spec"]["completions"] == 3


def test_export_spec_file_and_flags(tmp_path: Path) -> None:
    spec = tmp_path / "run.yaml"
    spec.write_text(
        f"model: {MODEL}\ninstance_type: m8i.2xlarge\nengine:\n  settings:\n    max_model_len: 4096\n"
        "sweep:\n  input_lens: [256]\n  concurrency: [2, 8]\n"
    )
    res = runner.invoke(
        app, ["export", "--spec", str(spec), "--kv-cache-space-gib", "6", "-o", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    engine = next(iter(yaml.safe_load_all((tmp_path / "o" / "01-engine.yaml").read_text())))
    c = engine["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "VLLM_CPU_KVCACHE_SPACE", "value": "6"} in c["env"]
    assert c["command"][c["command"].index("--max-model-len") + 1] == "4096"
    cm = next(iter(yaml.safe_load_all((tmp_path / "o" / "02-loadgen.yaml").read_text())))
    assert json.loads(cm["data"]["loadgen.json"])["sweep"]["concurrency"] == [2, 8]


def test_export_errors_are_clean(tmp_path: Path) -> None:
    res = runner.invoke(app, ["export", "-m", MODEL, "-i", "inf2.xlarge", "-o", str(tmp_path / "x")])
    assert res.exit_code == 2 and "host" in res.output and "--force" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "x").exists()
    res = runner.invoke(
        app, ["export", "-m", MODEL, "-i", "inf2.xlarge", "-o", str(tmp_path / "x"), "--force"]
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app, ["export", "-m", MODEL, "-i", "m8i.2xlarge", "-o", str(tmp_path / "y"), "--runtime", "vllm"]
    )
    assert res.exit_code == 2 and "serves gpu, not cpu" in res.output
    res = runner.invoke(app, ["export", "-m", MODEL, "-i", "m8i.2xlargee", "-o", str(tmp_path / "z")])
    assert res.exit_code == 2 and "m8i.2xlarge" in res.output  # did you mean


def test_loadgen_command_prints_framed_results(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from accelbench.deploy import incluster
    from tests.unit.deploy.test_kubernetes import fake_bench

    original = incluster.run_shard
    monkeypatch.setattr(incluster, "run_shard", lambda cfg, i, **kw: original(cfg, i, bench=fake_bench, **kw))
    cfg = tmp_path / "loadgen.json"
    cfg.write_text(
        json.dumps(
            {
                "run_id": "r",
                "base_url": "http://engine:8000",
                "served_model": "m",
                "sweep": {
                    "input_lens": [64],
                    "concurrency": [2],
                    "prompts_per_concurrency": 1,
                    "output_len": 3,
                    "num_warmups": 0,
                },
            }
        )
    )
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "0")
    res = runner.invoke(app, ["loadgen", "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    payload = decode_results(res.stdout)
    assert payload["shard"] == 0 and payload["cells"][0]["summary"]["completed"] == 2
    res = runner.invoke(app, ["loadgen", "--config", str(cfg), "--shard", "3"])
    assert res.exit_code == 2 and "outside" in res.output
