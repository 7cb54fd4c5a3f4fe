"""`accelbench fleet`: the ranked table and the JSON agree, the report files are written, and a bad traffic file
is a clean refusal naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from accelbench.cli.main import app

runner = CliRunner(env={"COLUMNS": "220"})
PROFILE = "input_tokens: 512\noutput_tokens: 128\nintervals:\n" + "".join(
    f"  - requests_per_s: {r}\n" for r in (0.2, 0.2, 1.0, 2.5, 1.5, 0.4)
)
ARGS = [
    "--model",
    "llama-3.1-8b-instruct",
    "--slo",
    "ttft:2000,tpot:100",
    "--instances",
    "g6.xlarge,g6e.xlarge,inf2.8xlarge",
]


def test_table_json_and_report_show_the_same_ranking(tmp_path: Path) -> None:
    traffic = tmp_path / "day.yaml"
    traffic.write_text(PROFILE)
    res = runner.invoke(app, ["fleet", "--traffic", str(traffic), *ARGS, "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    names = [c["instance"] for c in data["candidates"]]
    assert len(names) >= 2
    costs = [c["usd_per_day"] for c in data["candidates"]]
    assert costs == sorted(costs)
    first = data["candidates"][0]
    assert len(first["intervals"]) == 6 and all(i["servers"] >= 1 for i in first["intervals"])
    assert first["cold_start"]["lead_s"] > 0

    out = tmp_path / "out"
    res = runner.invoke(
        app, ["fleet", "--traffic", str(traffic), *ARGS, "--report", str(out), "--export", str(out / "k8s")]
    )
    assert res.exit_code == 0, res.output
    table = [line for line in res.stdout.splitlines() if any(n in line for n in names)]
    order = [
        next(n for n in names if n in line) for line in table if line.lstrip("│ ").split(" ")[0].isdigit()
    ]
    assert order == names
    md = (tmp_path / "out" / "fleet.md").read_text()
    assert md.index(names[0]) < md.index(names[1])
    assert "Servers per interval" in md
    # each interval's servers, cheapest candidate first, as the JSON has them
    per_interval = [
        line for line in md.splitlines() if line.startswith("| ") and line.count("|") == 4 + len(names)
    ]
    assert [int(line.split("|")[4]) for line in per_interval[1:]] == [
        i["servers"] for i in first["intervals"]
    ]
    assert "Servers per interval (cheapest first)" in res.stdout
    assert "plotly" in (tmp_path / "out" / "fleet.html").read_text().lower()
    assert (
        f"maxReplicas: {data['candidates'][0]['max_servers']}" in (out / "k8s" / "01-engine.yaml").read_text()
    )


def test_bad_traffic_is_a_clean_refusal(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("requests_per_s,input_tokens,output_tokens\n1,100,10\n2,100,zero\n")
    res = runner.invoke(app, ["fleet", "--traffic", str(bad), *ARGS])
    assert res.exit_code == 2
    assert "bad.csv:3: output_tokens must be a number, not 'zero'" in res.output
    assert "Traceback" not in res.output
