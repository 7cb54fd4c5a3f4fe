"""Each extension point is one module plus one registration, and the CLI selects it without a change to cli/.

Every test writes a small module into a temporary package on ``sys.path``, registers it with the one call
``REG.add_module("pkg.module")`` (a registry imports its listed modules on the next lookup), and then reaches it
through the command line as a user would. docs/extending.md points here."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from accelbench.bench.prompts import DATASETS
from accelbench.bench.schedule import SCHEDULES
from accelbench.cli.main import app
from accelbench.registry import Registry
from accelbench.report.sections import SECTIONS
from accelbench.runtimes.runtime import RUNTIMES
from accelbench.store.repo import Store
from accelbench.telemetry.devices.sources import DEVICE_SOURCES
from tests.support.report_data import make_summary
from tests.support.stream_server import Script, StreamServer, make_tokenizer_dir

runner = CliRunner()


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An importable package ``extpkg`` in a temporary folder; its modules are forgotten afterwards."""
    pkg = tmp_path / "extpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in [m for m in sys.modules if m == "extpkg" or m.startswith("extpkg.")]:
        del sys.modules[name]


def isolate(reg: Registry[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test register into ``reg`` and leave it as it was afterwards."""
    reg.names()  # load the shipped entries first, so the copies hold them
    monkeypatch.setattr(reg, "_items", dict(reg._items))
    monkeypatch.setattr(reg, "_modules", list(reg._modules))
    monkeypatch.setattr(reg, "_loaded", reg._loaded)


def write(pkg: Path, name: str, source: str) -> str:
    (pkg / f"{name}.py").write_text(textwrap.dedent(source))
    return f"extpkg.{name}"


# ---------------------------------------------------------------------------------------------- a runtime
TOY_RUNTIME = """
    from accelbench.domain.instance_types import AcceleratorType
    from accelbench.runtimes.runtime import RUNTIMES, Runtime, ServeParams


    class ToyServe(Runtime):
        name = "toyserve"
        accelerators = frozenset({AcceleratorType.cpu, AcceleratorType.gpu})
        tool_version_key = "toyserve"
        default_version = "1.0"

        def default_image(self, version, registry=None, arch="x86_64"):
            return f"example.org/toyserve:{version}"

        def serve_args(self, params: ServeParams) -> list[str]:
            return ["--model", params.model, "--port", str(params.port), "--toy-flag"]

        def command(self, params: ServeParams, python: str = "python3") -> list[str]:
            return ["toyserve", *self.serve_args(params)]

        def env(self, params: ServeParams) -> dict[str, str]:
            return {}

        def map_quantization(self, quantization, *, streaming=False):
            return []


    RUNTIMES.add("toyserve", ToyServe())
"""


def test_a_runtime_is_one_module_and_one_registration(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(RUNTIMES, monkeypatch)
    RUNTIMES.add_module(write(package, "toyserve", TOY_RUNTIME))
    spec = tmp_path / "run.yaml"
    spec.write_text("model: qwen2.5-7b-instruct\ninstance_type: g6.2xlarge\nengine: {name: toyserve}\n")
    res = runner.invoke(app, ["export", "--spec", str(spec), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    engine = next(iter(yaml.safe_load_all((tmp_path / "out" / "01-engine.yaml").read_text())))
    container = engine["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "example.org/toyserve:1.0"
    assert "--toy-flag" in [*container.get("command", []), *container.get("args", [])]


# ---------------------------------------------------------------------------------------------- a report section
TOY_SECTION = """
    from markupsafe import escape

    from accelbench.report.sections import SECTIONS, ReportSection


    def html(data):
        return f"<p id='toy-runs'>{escape(', '.join(r.name for r in data.comparison.runs))} ran.</p>"


    def markdown(data):
        return [", ".join(r.name for r in data.comparison.runs) + " ran."]


    SECTIONS.add("toy-section", ReportSection(heading="Toy section", html=html, markdown=markdown))
"""


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_report_section_is_one_module_and_one_registration(
    store: Store, package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(SECTIONS, monkeypatch)
    SECTIONS.add_module(write(package, "toy_section", TOY_SECTION))
    run = store.create_run(kind="sweep", label="toyrun", model="smol", engine="vllm-cpu")
    store.save_result(
        run.id,
        input_len=128,
        concurrency=1,
        repeat=0,
        summary=make_summary(128, 1, tpot_ms=20.0, ttft_ms=100.0),
    )
    res = runner.invoke(app, ["report", run.id, "--out", str(tmp_path / "r"), "--format", "json"])
    assert res.exit_code == 0, res.output
    paths = json.loads(res.stdout)
    html = Path(paths["html"]).read_text()
    assert '<a href="#toy-section">Toy section</a>' in html
    assert '<section id="toy-section">' in html and "<p id='toy-runs'>toyrun ran.</p>" in html
    assert "## Toy section\n\ntoyrun ran." in Path(paths["markdown"]).read_text()


# ---------------------------------------------------------------------------------------------- a telemetry source
TOY_SOURCE = """
    from accelbench.domain.device import DeviceKind, DeviceSample
    from accelbench.telemetry.devices.collector import DeviceCollector
    from accelbench.telemetry.devices.sources import DEVICE_SOURCES, Pick, SourcePlace


    class ToyMeter(DeviceCollector):
        name = "toymeter"

        def __init__(self) -> None:
            super().__init__()
            self.available = True
            self.sources = ["toymeter"]

        def sample(self, t_s=None):
            return [DeviceSample(t_s=self._now(t_s), device="toy0", kind=DeviceKind.gpu, power_w=42.0)]


    @DEVICE_SOURCES.register("toymeter")
    def toymeter(place: SourcePlace) -> Pick | None:
        return Pick(ToyMeter()) if place.tier in (None, "gpu") else None
"""


def bench_on_stream_server(tmp_path: Path, *flags: str) -> tuple[Result, list[str]]:
    """``accelbench bench ... --format json`` against the in-repo stream server, as a user runs it: the result and
    the prompts the server received, sorted."""
    tok = make_tokenizer_dir(tmp_path / "tok")
    with StreamServer(Script(ttft_ms=3, itl_ms=1), tokenizer_dir=tok, model="smol") as server:
        res = runner.invoke(
            app,
            ["bench", "--base-url", server.base_url, "--model", "smol", "--tokenizer", str(tok),
             "--output-len", "4", "--format", "json", *flags],
        )  # fmt: skip
        sent = sorted(r.prompt for r in server.records)
    return res, sent


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_telemetry_source_is_one_module_and_one_registration(
    store: Store, package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(DEVICE_SOURCES, monkeypatch)
    DEVICE_SOURCES.add_module(write(package, "toymeter", TOY_SOURCE))
    res, _ = bench_on_stream_server(tmp_path, "--input-len", "48", "--num-prompts", "4")
    assert res.exit_code == 0, res.output
    telemetry = json.loads(res.stdout)["summary"]["device_telemetry"]
    assert "toymeter" in telemetry["sources"]
    assert any(s["device"] == "toy0" and s["power_w"] == 42.0 for s in telemetry["samples"])


# ---------------------------------------------------------------------------------------------- a load schedule
TOY_SCHEDULE = '''
    from accelbench.bench.schedule import SCHEDULES

    CALLS = []


    @SCHEDULES.register("even")
    def even(n, request_rate, burstiness, seed):
        """One request every 1 / request_rate seconds, exactly."""
        CALLS.append((n, request_rate))
        return [i / request_rate for i in range(n)]
'''


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_load_schedule_is_one_module_and_one_registration(
    store: Store, package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(SCHEDULES, monkeypatch)
    module = write(package, "even", TOY_SCHEDULE)
    SCHEDULES.add_module(module)
    tok = make_tokenizer_dir(tmp_path / "tok")
    spec = tmp_path / "sweep.yaml"
    with StreamServer(Script(ttft_ms=3, itl_ms=1), tokenizer_dir=tok, model="smol") as server:
        spec.write_text(
            "schedule: even\nrequest_rate: 50\ninput_lens: [48]\nconcurrency: [2]\noutput_len: 4\n"
            f"prompts_per_concurrency: 2\nnum_warmups: 0\nserver: {{base_url: '{server.base_url}', "
            f"served_model: smol, tokenizer: '{tok}'}}\n"
        )
        res = runner.invoke(app, ["sweep", "--spec", str(spec), "--out", str(tmp_path / "o"), "-f", "json"])
    assert res.exit_code == 0, res.output
    assert sys.modules[module].CALLS == [(4, 50.0)]  # the cell's 2 x 2 requests, at the spec's rate
    run = store.get_run(json.loads(res.stdout)["run_id"])
    assert run.spec["sweep"]["schedule"] == "even"
    # a misspelled schedule is refused before any request, naming the one meant
    spec.write_text("schedule: evn\ninput_lens: [48]\n")
    res = runner.invoke(app, ["sweep", "--spec", str(spec), "--base-url", "http://127.0.0.1:9"])
    assert res.exit_code == 2 and "Did you mean 'even'" in res.output
    # and in a run spec's sweep section, before anything is deployed
    spec.write_text("model: qwen2.5-7b-instruct\ninstance_type: g6.2xlarge\nsweep: {schedule: evn}\n")
    res = runner.invoke(app, ["run", str(spec), "--dry-run"])
    assert res.exit_code == 2 and "sweep.schedule" in res.output and "Did you mean 'even'" in res.output


# ---------------------------------------------------------------------------------------------- a dataset
TOY_DATASET = '''
    from accelbench.bench.prompts import DATASETS, Prompt, PromptSource


    @DATASETS.register("numbered")
    def numbered(config, tokenizer, count, warmups):
        """Prompts that say which one they are, warmups first; the server counts their tokens."""

        def make(chunk, stop):
            for i in range(warmups + count):
                yield Prompt(f"numbered prompt {i}")

        return PromptSource(count=count, num_warmups=warmups, make=make, notes=["Numbered prompts."])
'''


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_dataset_is_one_module_and_one_registration(
    store: Store, package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(DATASETS, monkeypatch)
    DATASETS.add_module(write(package, "numbered", TOY_DATASET))
    res, sent = bench_on_stream_server(tmp_path, "--dataset", "numbered", "--num-prompts", "3")
    assert res.exit_code == 0, res.output
    assert sent == ["numbered prompt 0", "numbered prompt 1", "numbered prompt 2"]
    summary = json.loads(res.stdout)["summary"]
    assert summary["config"]["dataset"] == "numbered" and "Numbered prompts." in summary["notes"]
    # a misspelled dataset is refused before any request, naming the one meant
    res = runner.invoke(app, ["bench", "--base-url", "http://127.0.0.1:9", "--dataset", "numberd"])
    assert res.exit_code == 2 and "Did you mean 'numbered'" in res.output
    # and in a run spec's sweep section, before anything is deployed
    spec = tmp_path / "run.yaml"
    spec.write_text("model: qwen2.5-7b-instruct\ninstance_type: g6.2xlarge\nsweep: {dataset: numberd}\n")
    res = runner.invoke(app, ["run", str(spec), "--dry-run"])
    assert res.exit_code == 2 and "sweep.dataset" in res.output and "Did you mean 'numbered'" in res.output
