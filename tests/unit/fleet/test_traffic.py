"""Traffic in: traces counted per interval, profiles in YAML and CSV, and refusals that name file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelbench.errors import UserInputError
from accelbench.fleet.traffic import read_traffic


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_mooncake_trace_counted_per_interval(tmp_path: Path) -> None:
    # 10 requests in the first 100 s, 2 in the next 100 s (timestamps in ms)
    rows = [{"timestamp": i * 10_000, "input_length": 100, "output_length": 10} for i in range(10)]
    rows += [{"timestamp": 100_000 + i * 50_000, "input_length": 300, "output_length": 30} for i in range(2)]
    rows.append({"timestamp": 200_000, "input_length": 300, "output_length": 30})
    path = _write(tmp_path, "t.jsonl", "\n".join(json.dumps(r) for r in rows))
    traffic = read_traffic(path, interval_s=100, window_s=10)
    assert traffic.format == "mooncake"
    assert [i.requests for i in traffic.intervals] == [10, 3]
    assert [i.requests_per_s for i in traffic.intervals] == pytest.approx([0.1, 0.03])
    assert traffic.intervals[0].burstiness == pytest.approx(
        1.0
    )  # one per 10 s window: no variance, floored at 1
    inp, out = traffic.mean_tokens()
    assert inp == pytest.approx((10 * 100 + 3 * 300) / 13)
    assert out == pytest.approx((10 * 10 + 3 * 30) / 13)


def test_burstgpt_trace_measures_burstiness(tmp_path: Path) -> None:
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    # 20 requests in the first 10 s of a 100 s interval, then one at the end: bursty
    lines += [f"{i * 0.5},m,50,5,55,Conversation log" for i in range(20)]
    lines.append("100,m,50,5,55,Conversation log")
    traffic = read_traffic(_write(tmp_path, "b.csv", "\n".join(lines)), interval_s=100, window_s=10)
    assert traffic.format == "burstgpt"
    assert traffic.intervals[0].burstiness > 5


def test_csv_profile(tmp_path: Path) -> None:
    text = (
        "start_s,seconds,requests_per_s,input_tokens,output_tokens\n0,1800,2,400,100\n1800,1800,4,800,200\n"
    )
    traffic = read_traffic(_write(tmp_path, "p.csv", text))
    assert traffic.format == "profile"
    assert [(i.start_s, i.requests) for i in traffic.intervals] == [(0, 3600), (1800, 7200)]
    assert traffic.mean_tokens() == pytest.approx(
        ((3600 * 400 + 7200 * 800) / 10800, (3600 * 100 + 7200 * 200) / 10800)
    )


def test_yaml_length_distribution_uses_its_mean(tmp_path: Path) -> None:
    text = "input_tokens: {256: 0.75, 2048: 0.25}\noutput_tokens: 100\nintervals:\n  - requests_per_s: 1\n"
    traffic = read_traffic(_write(tmp_path, "p.yaml", text))
    assert traffic.intervals[0].input_tokens == pytest.approx(0.75 * 256 + 0.25 * 2048)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("a.yaml", "output_tokens: 10\ninput_tokens: 5\nintervals:\n  - requests_per_s: 1\n  - requests_per_s: -2\n",
         r"a\.yaml:5: requests_per_s must be at least 0"),
        ("b.yaml", "output_tokens: 10\ninput_tokens: 5\nintervals:\n  - {requests_per_s: 1, rate: 3}\n",
         r"b\.yaml:4: unknown field 'rate'"),
        ("c.yaml", "input_tokens: 5\nintervals:\n  - requests_per_s: 1\n", r"c\.yaml:3: output_tokens is missing"),
        ("d.yaml", "intervals: []\n", r"d\.yaml:1: intervals must be a non-empty list"),
        ("e.csv", "requests_per_s,input_tokens,output_tokens\n1,5,10\nfast,5,10\n",
         r"e\.csv:3: requests_per_s must be a number, not 'fast'"),
        ("f.csv", "requests_per_s,input_tokens,output_tokens,colour\n1,5,10,red\n", r"f\.csv:1: unknown field 'colour'"),
        ("g.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 3}\n{"timestamp": 5, "input_length": 5}\n',
         r"g\.jsonl:2 has no 'output_length' field"),
        ("h.jsonl", '{"timestamp": 7, "input_length": 5, "output_length": 3}\n', r"h\.jsonl: every request has the same"),
        ("i.yaml", "input_tokens: 5\noutput_tokens: 5\nintervals:\n  - requests_per_s: 0\n", r"the traffic has no requests"),
        ("j.txt", "hello", r"Cannot tell the trace format"),
        ("k.yaml", "input_tokens: 5\ninput_tokens: 6\n", r"k\.yaml:2: 'input_tokens' is given twice"),
        ("l.yaml", "? [a, b]\n: 1\n", r"l\.yaml: not a profile"),
    ],
)  # fmt: skip
def test_bad_traffic_is_refused_with_file_line_and_field(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    with pytest.raises(UserInputError, match=expected):
        read_traffic(_write(tmp_path, name, text))


def test_missing_file_and_window_longer_than_interval(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="does not exist"):
        read_traffic(tmp_path / "nope.yaml")
    path = _write(
        tmp_path, "p.yaml", "input_tokens: 5\noutput_tokens: 5\nintervals:\n  - requests_per_s: 1\n"
    )
    with pytest.raises(UserInputError, match="peak window"):
        read_traffic(path, interval_s=60, window_s=120)
