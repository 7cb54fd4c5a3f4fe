"""params_for: user settings win, the recommendation fills the rest, per tier."""

from __future__ import annotations

from accelbench.domain.run import EngineSettings
from accelbench.runtimes.params import params_for
from tests.support.instances import instance

REC = {
    "max_model_len": 16384,
    "max_num_seqs": 12,
    "tensor_parallel_size": 1,
    "kv_cache_space_gib": 30,
    "kv_cache_dtype": "fp8",
    "quantization": "none",
    "weights_gib": 15.2,
}


def test_recommendation_fills_unset_fields_on_cpu() -> None:
    p = params_for(
        model="m",
        served_model_name="m",
        instance=instance("r8g.4xlarge"),
        recommendation=REC,
        settings=EngineSettings(max_num_seqs=4),
    )
    s = p.settings
    assert s.max_num_seqs == 4  # the user's value wins
    assert s.max_model_len == 16384 and s.kv_cache_space_gib == 30
    assert s.kv_cache_dtype is None  # a GPU knob is not carried to CPU
    assert s.quantization is None
    assert p.model_size_gib == 15.2 and p.arch == "arm64" and p.numa_nodes == 1


def test_recommendation_on_gpu_carries_fp8_kv_not_cpu_budget() -> None:
    p = params_for(
        model="s3://b/m", served_model_name="m", instance=instance("g6.2xlarge"), recommendation=REC
    )
    assert p.settings.kv_cache_dtype == "fp8"
    assert p.settings.kv_cache_space_gib is None
    assert p.stream_weights is True and p.accelerator_count == 1


def test_object_recommendation_with_settings_attribute() -> None:
    class Rec:
        settings = EngineSettings(max_model_len=2048, kv_cache_space_gib=4)
        weights_gib = 1.0

    p = params_for(model="m", served_model_name="m", instance=instance("m8i.2xlarge"), recommendation=Rec())
    assert p.settings.max_model_len == 2048 and p.settings.kv_cache_space_gib == 4
