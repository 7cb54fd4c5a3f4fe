"""What a run records as the precision its engine serves the weights in."""

from __future__ import annotations

from pathlib import Path

from accelbench.deploy.orchestrator import weights_precision
from accelbench.deploy.target import DeployedEngine


def _deployed(**kw: object) -> DeployedEngine:
    return DeployedEngine(target="local", model="m", served_model="m", base_url="http://x", **kw)  # type: ignore[arg-type]


def test_dtype_flag_names_the_precision(tmp_path: Path) -> None:
    cmd = ["python", "-m", "vllm.entrypoints.openai.api_server", "--dtype", "bfloat16"]
    assert weights_precision(_deployed(model_path=str(tmp_path / "missing"), command=cmd)) == "bf16"
    assert weights_precision(_deployed(command=["x", "--dtype", "float16"])) == "fp16"
    assert weights_precision(_deployed(command=["x"])) is None


def test_prequantized_checkpoint_names_its_scheme(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, '
        '"intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, '
        '"vocab_size": 1000, "max_position_embeddings": 512, '
        '"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}'
    )
    got = weights_precision(_deployed(model_path=str(tmp_path), command=["x", "--dtype", "bfloat16"]))
    assert got is not None and "AWQ" in got.upper()
