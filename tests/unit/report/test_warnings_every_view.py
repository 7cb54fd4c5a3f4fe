"""Every view renders the one grouping of a run's warnings (report/failures.py ``run_warnings``): a note all six
cells carry is one line "in 6 of 6 cells" in ``runs show``, on the run page and in the HTML and Markdown report,
and the device notes (one paragraph per cell before) are left to the Devices section, which says once what was
not measured."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.domain.device import DeviceKind, DeviceSample, DeviceTelemetry, device_notes
from accelbench.domain.run import RunStatus
from accelbench.store.repo import Store
from tests.support.api_app import api_for
from tests.support.summaries import make_summary

runner = CliRunner(env={"COLUMNS": "250"})
SCRAPE = "Scraping /metrics took 3% of the client time: its figures carry that cost."
LAG = "The client lagged behind its schedule: the figures at this cell include that delay."
MISSING = "the engine's own cgroup: process ids are not known for a server given by URL"


def seed(store: Store) -> str:
    """Six cells, each summary carrying the scrape note, its device notes (a CPU with no power source and a
    missing cgroup) and, at concurrency 4, the client's lag."""
    r = store.create_run(kind="sweep", status=RunStatus.completed, label="cpu", served_model="smol")
    samples = [
        DeviceSample(t_s=t, device="cpu", kind=DeviceKind.cpu, util_pct=50.0, memory_used_bytes=2**30)
        for t in (0.0, 1.0)
    ]
    tel = DeviceTelemetry.build(samples, sources=["cpu:/proc"], missing=[MISSING])
    for input_len in (128, 512):
        for conc in (1, 2, 4):
            summary = make_summary(input_len=input_len, concurrency=conc)
            notes = [SCRAPE, *device_notes(tel, summary.total_output_tokens)] + ([LAG] if conc == 4 else [])
            summary = summary.model_copy(update={"notes": notes, "device_telemetry": tel})
            store.save_result(r.id, input_len=input_len, concurrency=conc, repeat=0, summary=summary)
    return r.id


def test_runs_show_says_each_note_once_with_its_cells(store: Store) -> None:
    rid = seed(store)
    res = runner.invoke(app, ["runs", "show", rid])
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())
    assert out.count(SCRAPE) == 1 and f"{SCRAPE} (in 6 of 6 cells)" in out
    assert out.count(LAG) == 1
    assert f"{LAG} (in 2 of 6 cells: input 128, concurrency 4; input 512, concurrency 4)" in out
    assert out.count("Energy per token: unknown") == 1
    assert "Device telemetry lacks" not in out and "Device cpu: utilisation" not in out
    assert out.count(MISSING) == 1  # the Devices section's "Not measured on this machine"


def test_the_run_page_says_each_note_once(store: Store) -> None:
    rid = seed(store)
    with api_for(store) as api:
        page = api.client.get(f"/runs/{rid}")
    assert page.status_code == 200
    html = page.text
    section = html[html.index('id="result-warnings"') :]
    section = section[: section.index("</ul>")]
    assert section.count("<li>") == 3  # scrape, energy unknown, lag: not 6 x 5 bullets
    assert section.count(SCRAPE) == 1 and "(in 6 of 6 cells)" in section
    assert "Device telemetry lacks" not in html


def test_the_report_says_each_note_once(store: Store, tmp_path: Path) -> None:
    from accelbench.report.files import load_report
    from accelbench.report.html import render_html
    from accelbench.report.markdown import render_markdown

    rid = seed(store)
    data = load_report(store, [rid])
    html = render_html(data)
    section = html[html.index('id="warnings-list"') :]
    section = section[: section.index("</ul>")]
    assert section.count("<li>") == 3 and section.count(SCRAPE) == 1 and "in 6 of 6 cells" in section
    md = render_markdown(data, {})
    assert "## Failures and warnings" in md
    assert md.count(SCRAPE) == 1 and f"- {SCRAPE} (in 6 of 6 cells)" in md
    assert md.index("## Results") < md.index("## Failures and warnings")
