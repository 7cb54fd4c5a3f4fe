"""llama.cpp (llama-cpp-python's server, compiled at install) serving the same model's GGUF file, installed,
started and torn down by accelbench: the comparison a CPU user wants beside vLLM CPU."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app
from accelbench.deploy import engines
from accelbench.deploy.answer_check import check_endpoint
from accelbench.deploy.engines import EngineInstall
from accelbench.deploy.isa_fault import host_groups
from accelbench.deploy.local import LocalProcessTarget
from accelbench.deploy.model_store import PreparedModel
from accelbench.deploy.orchestrator import create_run, execute_run
from accelbench.deploy.proctree import processes_in_group
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.run import EngineSettings, EngineSpec, LocalTarget, RunSpec, RunStatus, SweepSpec
from accelbench.store import get_store

pytestmark = [pytest.mark.llamacpp, pytest.mark.timeout(3600)]  # the first install compiles llama.cpp


def test_llamacpp_answers_with_real_words(
    llamacpp_endpoint: Endpoint, llamacpp_server: LocalProcessTarget, smollm2_model: PreparedModel
) -> None:
    check = check_endpoint(llamacpp_endpoint, source="llamacpp")
    assert check.passed, f"{check.answer!r}: {check.reason}"
    deployed = llamacpp_server.deployed
    assert deployed is not None
    argv = deployed.command
    assert argv[1:3] == ["-m", "llama_cpp.server"]
    assert argv[argv.index("--model") + 1] == smollm2_model.gguf_path  # the same GGUF file, unchanged
    assert argv[argv.index("--model_alias") + 1] == llamacpp_endpoint.served_model
    assert "--n_threads" in argv
    assert llamacpp_endpoint.tokenizer == smollm2_model.hf_dir  # counts output tokens (no usage in streams)


def test_llamacpp_install_served_on_this_cpu_and_says_how_it_was_built(
    llamacpp_engine: EngineInstall, cpu_path: Callable[[str], None]
) -> None:
    """The install started llama.cpp and had it answer one request here; the build it kept is recorded and
    shown. On a CPU that kills the native build (AMX under some hypervisors) it is a rebuild without AMX."""
    info = llamacpp_engine
    build, check = info.build, info.serve_check
    assert build is not None and check is not None and check.passed
    cpu, flags, sha = engines._cpu()
    assert check.cpu_flags_sha == sha and check.cpu == cpu
    assert check.compiled_isa, (
        "llama.cpp reports the instruction sets it was built with when it loads a model"
    )
    assert set(check.compiled_isa) <= host_groups(flags)  # never built for a group this CPU lacks
    summary = info.build_summary() or ""
    if build.native:
        assert build.rebuilds == 0 and not build.env
        cpu_path(f"llama.cpp native build served on the first try on {cpu}: {summary}")
    else:
        # killed by SIGILL, or by a general protection fault in ggml's AMX tile set-up (ldtilecfg)
        assert build.reason and (
            "illegal instruction" in build.reason or "general protection fault" in build.reason
        )
        assert not set(build.without_isa) & set(check.compiled_isa)  # the failing group is really gone
        assert "-DGGML_NATIVE=OFF" in build.env["CMAKE_ARGS"]
        cpu_path(f"llama.cpp rebuilt on {cpu}: {summary}")
    listed = CliRunner().invoke(app, ["engine", "list", "--format", "json"])
    assert listed.exit_code == 0, listed.output
    row = next(e for e in json.loads(listed.stdout) if e["name"] == "llamacpp")
    assert row["build"] == build.model_dump(mode="json") and row["serve_check"]["passed"]
    table = CliRunner(env={"COLUMNS": "400"}).invoke(app, ["engine", "list"])
    assert "build" in table.output and summary[:20] in table.output


def test_llamacpp_stream_carries_no_usage(llamacpp_endpoint: Endpoint) -> None:
    """What the runtime module says about this server, checked: no usage chunk even when asked."""
    body = {
        "model": llamacpp_endpoint.served_model,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chunks = []
    with httpx.stream(
        "POST", llamacpp_endpoint.base_url + "/v1/chat/completions", json=body, timeout=120
    ) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    assert chunks and not any(c.get("usage") for c in chunks)


def test_a_sweep_on_llamacpp(llamacpp_engine: EngineInstall, smollm2_model: PreparedModel) -> None:
    store = get_store()
    spec = RunSpec(
        label="llama.cpp",
        model=smollm2_model.name,
        engine=EngineSpec(
            name="llamacpp", version=llamacpp_engine.version, settings=EngineSettings(max_model_len=2048)
        ),
        target=LocalTarget(startup_timeout_s=300),
        sweep=SweepSpec(
            input_lens=[128], concurrency=[1, 2], repeats=1, output_len=16, prompts_per_concurrency=2
        ),
    )
    final = execute_run(store, create_run(store, spec).id)
    assert final.status == RunStatus.completed, final.error
    results = store.get_results(final.id)
    assert len(results) == 2 and all(r.failed == 0 for r in results)
    assert all(r.summary["output_tokens_source"] in ("tokenizer", "chunks") for r in results)
    assert final.extra["answer_check"]["passed"]
    build = (final.environment or {}).get("engine_build") or {}
    assert build.get("summary") == llamacpp_engine.build_summary()  # every run says how its engine was built
    assert processes_in_group(final.extra["deployment"]["pid"]) == []
