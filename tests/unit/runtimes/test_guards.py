"""Guards: each CPU rule refuses on a CPU instance and the very same settings pass on a GPU instance."""

from __future__ import annotations

import pytest

from accelbench.domain.run import EngineSettings
from accelbench.errors import GuardError
from accelbench.runtimes.guards import CPU_DENSE_CEILING, check, evaluate
from accelbench.runtimes.params import params_for
from tests.support.instances import instance


def p(name: str, parameters: float | None = 7.6e9, moe: bool = False, **settings: object):
    kw = dict(settings)
    if instance(name).accelerator_type == "cpu":
        kw.setdefault("kv_cache_space_gib", 8)
    return params_for(
        model="m",
        served_model_name="m",
        instance=instance(name),
        parameters=parameters,
        moe=moe,
        settings=EngineSettings(**kw),
    )  # type: ignore[arg-type]


CASES = [
    pytest.param({"kv_cache_dtype": "fp8"}, 7.6e9, "kv_cache_dtype=fp8", id="fp8-kv"),
    pytest.param(
        {"deployment_mode": "distributed"}, 7.6e9, "set deployment_mode to single", id="distributed"
    ),
    pytest.param(
        {"deployment_mode": "disaggregated"}, 7.6e9, "deployment_mode=disaggregated", id="disaggregated"
    ),
    pytest.param({"tensor_parallel_size": 2}, 7.6e9, "exceeds the 1 NUMA node", id="tp-above-numa"),
    pytest.param({}, 32e9, "above the CPU ceiling", id="dense-32b"),
]


@pytest.mark.parametrize(("settings", "parameters", "needle"), CASES)
def test_cpu_refuses(settings: dict[str, object], parameters: float, needle: str) -> None:
    with pytest.raises(GuardError) as err:
        check(p("m8i.2xlarge", parameters, **settings))
    assert needle in str(err.value)


@pytest.mark.parametrize(("settings", "parameters", "needle"), CASES)
def test_same_settings_pass_on_gpu(settings: dict[str, object], parameters: float, needle: str) -> None:
    # p5.48xlarge: 8 GPUs, so TP 2 is fine there too
    assert check(p("p5.48xlarge", parameters, **settings)) == []


def test_tp_equal_to_numa_nodes_passes_on_two_sockets() -> None:
    assert check(p("m7i.48xlarge", tensor_parallel_size=2)) == []
    with pytest.raises(GuardError, match="exceeds the 2 NUMA"):
        check(p("m7i.48xlarge", tensor_parallel_size=4))


def test_cpu_ceiling_boundaries() -> None:
    assert len(check(p("r8g.4xlarge", CPU_DENSE_CEILING))) == 1  # at the ceiling: allowed, with a warning
    assert check(p("r8g.4xlarge", 7.6e9)) == []
    warnings = check(p("r8g.4xlarge", 9e9))
    assert len(warnings) == 1 and "slow on CPU" in warnings[0]
    assert check(p("r8g.4xlarge", 32e9, quantization="int8")) == []  # quantized: allowed
    assert check(p("r8g.4xlarge", 30e9, moe=True)) == []  # mixture of experts: not a dense model
    assert check(p("r8g.4xlarge", None)) == []  # unknown size: the planner decides


def test_runtime_accelerator_mismatch() -> None:
    with pytest.raises(GuardError, match="serves gpu, not cpu"):
        check(p("m8i.2xlarge"), "vllm")
    with pytest.raises(GuardError, match="serves cpu, not gpu"):
        check(p("g6.2xlarge"), "vllm-cpu")


def test_all_errors_reported_at_once() -> None:
    report = evaluate(p("m8i.2xlarge", 32e9, kv_cache_dtype="fp8", deployment_mode="distributed"))
    assert len(report.errors) == 3
    with pytest.raises(GuardError) as err:
        check(p("m8i.2xlarge", 32e9, kv_cache_dtype="fp8", deployment_mode="distributed"))
    assert str(err.value).startswith("3 settings cannot work")
    assert err.value.status_code == 400
