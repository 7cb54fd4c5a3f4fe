"""The workload flags' own parsers: --input-dist/--output-dist and --stages."""

from __future__ import annotations

import pytest

from accelbench.cli.load_flags import Given, Group, dist_flag, load_flags, parse_dist, parse_stages
from accelbench.domain.load import LoadSettings
from accelbench.errors import UserInputError


def test_a_distribution_flag_reads_its_kind_and_keys() -> None:
    d = parse_dist("normal:std=64,min=16,max=2048", "--input-dist")
    assert d is not None and (d.kind, d.std, d.min, d.max) == ("normal", 64.0, 16, 2048)
    assert parse_dist("uniform", "--output-dist").kind == "uniform"  # type: ignore[union-attr]
    assert parse_dist(None, "--input-dist") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("uniform:min=50,max=10", "min 50 is more than max 10"),
        ("poisson", "kind"),
        ("normal:std", "is not KEY=VALUE"),
        ("lognormal:sigma=-1", "sigma"),
    ],
)
def test_a_bad_distribution_is_refused_naming_the_flag_and_field(text: str, message: str) -> None:
    with pytest.raises(UserInputError, match=message) as err:
        parse_dist(text, "--input-dist")
    assert "--input-dist" in err.value.message


def test_stages_read_concurrency_and_rate_stages_with_ramps() -> None:
    stages = parse_stages("c=1:30, c=4:60/20,c=8:60")
    assert stages is not None
    assert [(s.concurrency, s.duration_s, s.ramp_up_s) for s in stages] == [
        (1, 30, 0),
        (4, 60, 20),
        (8, 60, 0),
    ]
    rates = parse_stages("r=2.5:10/4")
    assert rates is not None and rates[0].request_rate == 2.5 and rates[0].ramp_up_s == 4
    assert parse_stages(None) is None


@pytest.mark.parametrize(
    ("text", "message"),
    [("c=4", "stage 1 'c=4' is not"), ("c=2:10,x=1:2", "stage 2"), ("c=2:10/20", "longer than the stage")],
)
def test_a_bad_stage_is_refused_naming_it(text: str, message: str) -> None:
    with pytest.raises(UserInputError, match=message):
        parse_stages(text)


def test_workload_values_keep_only_what_was_given() -> None:
    dists = {
        "input_dist": dist_flag("--input-dist", "input", "x"),
        "output_dist": dist_flag("--output-dist", "output", "y"),
    }
    group = Group("load", LoadSettings, load_flags("turns", "tools", "prefix_groups") | dists)
    typed = {"turns": 3, "tools": None, "prefix_groups": None, "input_dist": "fixed", "output_dist": None}
    out = Given([group], typed).fields("load")
    assert out["turns"] == 3 and "tools" not in out and out["input_dist"].kind == "fixed"
    assert "output_dist" not in out
