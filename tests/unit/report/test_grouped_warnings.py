"""A run's warnings are collected once and grouped: one line per distinct note with the cells it applies to
("in 6 of 6 cells"), the failed cells first and apart, and the device notes left to the Devices section."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from accelbench.domain.device import DeviceKind, DeviceSample, DeviceTelemetry, device_notes
from accelbench.domain.results import ResultInfo
from accelbench.domain.run import CellStatus
from accelbench.report.failures import run_warnings

LAG = "The client lagged behind its schedule by 12 ms at the median: its figures include that delay."
MISSING = "the engine's own cgroup: process ids are not known for a server given by URL"
CELLS = [(i, c) for i in (128, 512) for c in (1, 2, 4)]


def telemetry() -> DeviceTelemetry:
    samples = [
        DeviceSample(t_s=t, device="cpu", kind=DeviceKind.cpu, util_pct=40.0 + t, memory_used_bytes=2**30)
        for t in (0.0, 1.0, 2.0)
    ]
    return DeviceTelemetry.build(samples, sources=["cpu:/proc"], missing=[MISSING])


def result(i: int, input_len: int, concurrency: int, *, repeat: int = 0, **summary: Any) -> ResultInfo:
    return ResultInfo(
        id=i,
        run_id="r",
        input_len=input_len,
        concurrency=concurrency,
        repeat=repeat,
        status=CellStatus.completed,
        completed=10,
        failed=int(summary.pop("failed", 0)),
        summary=summary,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def six_cells() -> list[ResultInfo]:
    """Six cells, two repeats each: every cell carries its device notes and the same 'energy unknown' note;
    two cells carry the client's lag; one cell failed requests."""
    tel = telemetry()
    out = []
    for n, (il, c) in enumerate(CELLS):
        for rep in (0, 1):
            notes = device_notes(tel, 320)
            if c == 4:
                notes.append(LAG)
            extra: dict[str, Any] = {}
            if (il, c) == (512, 4):
                extra = {"failed": 3, "errors": {"HTTP 400: too long": 3}}
            out.append(
                result(
                    2 * n + rep,
                    il,
                    c,
                    repeat=rep,
                    notes=notes,
                    device_telemetry=tel.model_dump(mode="json"),
                    total_output_tokens=320,
                    **extra,
                )
            )
    return out


def test_a_note_every_cell_carries_is_one_line_with_its_count() -> None:
    found = run_warnings(six_cells())
    assert found.cells == 6
    energy = [n for n in found.notes if n.text.startswith("Energy per token: unknown")]
    assert len(energy) == 1  # twelve summaries, one line
    assert energy[0].count == 6 and energy[0].where() == "in 6 of 6 cells"
    assert energy[0].line().endswith("(in 6 of 6 cells)")


def test_a_note_some_cells_carry_names_them() -> None:
    found = run_warnings(six_cells())
    (lag,) = [n for n in found.notes if n.text == LAG]
    assert lag.cells == ("input 128, concurrency 4", "input 512, concurrency 4")
    assert lag.where() == "in 2 of 6 cells: input 128, concurrency 4; input 512, concurrency 4"


def test_many_cells_are_named_by_the_first_few() -> None:
    results = [result(n, il, c, notes=["slow"]) for n, (il, c) in enumerate(CELLS[:5])]
    results.append(result(9, 512, 4))
    (note,) = run_warnings(results).notes
    assert note.where() == (
        "in 5 of 6 cells: input 128, concurrency 1; input 128, concurrency 2; input 128, concurrency 4 and 2 more"
    )


def test_the_device_notes_are_left_to_the_devices_section() -> None:
    """Each device's figures, the energy line and the sources not measured are drawn from the telemetry by the
    Devices section: as warnings they were one paragraph per cell."""
    texts = [n.text for n in run_warnings(six_cells()).notes]
    assert not any(t.startswith(("Device cpu:", "Device telemetry lacks", "Energy: ")) for t in texts)
    assert texts == [
        "Energy per token: unknown (no power or energy source for the devices that served).",
        LAG,
    ]


def test_failures_come_first_and_apart_from_the_notes() -> None:
    found = run_warnings(six_cells())
    (failed,) = found.failures
    assert (failed.input_len, failed.concurrency, failed.failed) == (512, 4, 6)
    assert failed.reason == "HTTP 400: too long"
    assert all("failed" not in n.text for n in found.notes)
    assert found


def test_a_run_without_notes_has_no_warnings() -> None:
    found = run_warnings([result(0, 128, 1)])
    assert not found and found.notes == [] and found.failures == []
    assert found.cells == 1


SCRAPE = (
    "Each /metrics scrape took {} ms on average (every 1 s); rendering metrics costs the server CPU, which can "
    "slow a server with few CPUs: compare with --no-scrape or a longer --scrape-interval."
)


def test_notes_that_differ_only_in_their_figures_are_one_with_ranges() -> None:
    """Each cell measures its own scrape cost: six sentences that differ in one figure are one line with the
    figure's range over the cells (the real demo printed six)."""
    costs = ["114", "75", "149", "136", "141", "1,151"]
    results = [
        result(n, il, c, notes=[SCRAPE.format(ms)])
        for n, ((il, c), ms) in enumerate(zip(CELLS, costs, strict=True))
    ]
    (note,) = run_warnings(results).notes
    assert note.text == SCRAPE.format("75-1,151")
    assert note.where() == "in 6 of 6 cells"


def test_figures_inside_words_and_equal_figures_stay_as_they_are() -> None:
    results = [
        result(0, 128, 1, notes=["qwen2.5-7b served 2 requests over 1 s."]),
        result(1, 128, 2, notes=["qwen2.5-7b served 4 requests over 1 s."]),
        result(2, 128, 4, notes=["llama-3 served 4 requests over 1 s."]),
    ]
    texts = [n.text for n in run_warnings(results).notes]
    assert texts == ["qwen2.5-7b served 2-4 requests over 1 s.", "llama-3 served 4 requests over 1 s."]
