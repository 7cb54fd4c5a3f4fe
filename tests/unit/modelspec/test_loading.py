"""Reading model specs: config directories, GGUF files, the Hugging Face cache, the hub, presets, errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from accelbench.domain.model import ModelSource, ModelTask
from accelbench.errors import NotFoundError, UserInputError
from accelbench.modelspec import load_model_spec, spec_from_config
from accelbench.modelspec.presets import preset_document

TINY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 160,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 100,
    "max_position_embeddings": 512,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}


def write_dir(path: Path, config: dict[str, Any], **files: Any) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    for name, content in files.items():
        fname = name.replace("__", ".")
        (path / fname).write_text(content if isinstance(content, str) else json.dumps(content))
    return path


# --------------------------------------------------------------------------------------------- config dirs
def test_config_directory_and_checkpoint_size(tmp_path: Path) -> None:
    d = write_dir(
        tmp_path / "tiny",
        TINY,
        model__safetensors__index__json={"metadata": {"total_size": 123456}, "weight_map": {}},
    )
    m = load_model_spec(str(d))
    assert m.source == ModelSource.config_dir and m.name == "tiny"
    assert m.checkpoint_bytes == 123456
    # embed 100x64 (tied) + 2 x (q 64x64 + k,v 64x32 + o 64x64 + mlp 3x64x160 + 2 norms) + final norm
    per_layer = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 160 + 2 * 64
    assert m.parameters.total == 100 * 64 + 2 * per_layer + 64
    # a config.json path works too
    assert load_model_spec(str(d / "config.json")).parameters.total == m.parameters.total


def test_safetensors_files_give_the_size_without_an_index(tmp_path: Path) -> None:
    d = write_dir(tmp_path / "m", TINY)
    (d / "model.safetensors").write_bytes(b"x" * 4096)
    assert load_model_spec(str(d)).checkpoint_bytes == 4096


@pytest.mark.parametrize(
    ("qc", "method", "bits", "scheme_part"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm"}, "awq", 4, "AWQ"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "gptq", 4, "GPTQ"),
        (
            {
                "quant_method": "compressed-tensors",
                "format": "int-quantized",
                "config_groups": {
                    "group_0": {
                        "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
                        "input_activations": {"num_bits": 8, "type": "int", "dynamic": True},
                        "targets": ["Linear"],
                    }
                },
                "ignore": ["lm_head"],
            },
            "compressed-tensors",
            8,
            "W8A8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}},
            },
            "compressed-tensors",
            4,
            "W4A16",
        ),
        (
            {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
            "fp8",
            8,
            "FP8 block",
        ),
        (
            {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
            "bitsandbytes",
            4,
            "NF4",
        ),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "bitsandbytes", 8, "LLM.int8"),
    ],
)
def test_pre_quantized_checkpoints_are_detected(
    tmp_path: Path, qc: dict[str, Any], method: str, bits: int, scheme_part: str
) -> None:
    m = load_model_spec(str(write_dir(tmp_path / "q", {**TINY, "quantization_config": qc})))
    assert m.quantization is not None
    assert m.quantization.method == method
    assert m.quantization.bits == bits
    assert scheme_part in m.quantization.scheme


def test_old_gptq_quantize_config_file(tmp_path: Path) -> None:
    d = write_dir(
        tmp_path / "g", TINY, quantize_config__json={"bits": 4, "group_size": 128, "desc_act": True}
    )
    m = load_model_spec(str(d))
    assert m.quantization is not None and m.quantization.method == "gptq"


@pytest.mark.parametrize(
    ("config", "files", "task"),
    [
        ({**TINY, "architectures": ["BertModel"], "model_type": "bert"}, {}, ModelTask.embed),
        (
            {**TINY, "architectures": ["XLMRobertaForSequenceClassification"], "model_type": "xlm-roberta"},
            {},
            ModelTask.classify,
        ),
        ({**TINY, "architectures": ["BertForMaskedLM"], "model_type": "bert"}, {}, ModelTask.other),
        ({**TINY, "architectures": ["Qwen2ForRewardModel"], "model_type": "qwen2"}, {}, ModelTask.reward),
        # an embedding model on a causal-LM backbone, packaged for sentence-transformers
        (TINY, {"modules__json": [{"type": "sentence_transformers.models.Transformer"}]}, ModelTask.embed),
        (TINY, {"README__md": "---\npipeline_tag: feature-extraction\n---\n# x"}, ModelTask.embed),
        (TINY, {"README__md": "---\nlicense: mit\npipeline_tag: text-generation\n---\n"}, ModelTask.generate),
    ],
)
def test_non_generative_models_are_recognised(
    tmp_path: Path, config: dict[str, Any], files: dict[str, Any], task: ModelTask
) -> None:
    m = load_model_spec(str(write_dir(tmp_path / "x", config, **files)))
    assert m.task == task
    assert m.task_reason


def test_diffusers_pipeline_is_diffusion(tmp_path: Path) -> None:
    d = tmp_path / "sd"
    d.mkdir()
    (d / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline"}))
    with pytest.raises(UserInputError, match="diffusers pipeline"):
        load_model_spec(str(d))


def test_missing_fields_are_a_clear_error() -> None:
    with pytest.raises(UserInputError, match="num_hidden_layers"):
        spec_from_config(
            {"hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10},
            name="x",
            source=ModelSource.config_dir,
            ref="x",
        )


# --------------------------------------------------------------------------------------------- GGUF
def write_gguf(path: Path, *, tied: bool = True, dtype: Any = np.float32) -> None:
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(2)
    w.add_context_length(512)
    w.add_embedding_length(64)
    w.add_feed_forward_length(160)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_vocab_size(100)
    w.add_name("Tiny Llama")
    w.add_basename("tiny")
    w.add_size_label("5M")

    def t(name: str, *shape: int) -> None:
        w.add_tensor(name, np.zeros(shape, dtype=dtype))

    t("token_embd.weight", 100, 64)
    for i in range(2):
        t(f"blk.{i}.attn_norm.weight", 64)
        t(f"blk.{i}.attn_q.weight", 64, 64)
        t(f"blk.{i}.attn_k.weight", 32, 64)
        t(f"blk.{i}.attn_v.weight", 32, 64)
        t(f"blk.{i}.attn_output.weight", 64, 64)
        t(f"blk.{i}.ffn_norm.weight", 64)
        t(f"blk.{i}.ffn_gate.weight", 160, 64)
        t(f"blk.{i}.ffn_up.weight", 160, 64)
        t(f"blk.{i}.ffn_down.weight", 64, 160)
    t("output_norm.weight", 64)
    if not tied:
        t("output.weight", 100, 64)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_counts_match_the_config_formulas(tmp_path: Path) -> None:
    """The formulas in params.py against the tensor shapes of a real GGUF file of the same architecture."""
    f = tmp_path / "tiny.gguf"
    write_gguf(f, tied=True)
    g = load_model_spec(str(f))
    c = spec_from_config(TINY, name="t", source=ModelSource.config_dir, ref="t")
    assert g.source == ModelSource.gguf and g.parameters.counted_from == "gguf"
    assert g.parameters.total == c.parameters.total
    assert g.parameters.attention == c.parameters.attention
    assert g.parameters.mlp == c.parameters.mlp
    assert g.parameters.norms == c.parameters.norms
    assert g.tie_word_embeddings
    assert g.kv_bytes_per_token(2) == c.kv_bytes_per_token(2) == 2 * 2 * 2 * 16 * 2
    assert g.num_kv_heads == 2 and g.max_position_embeddings == 512
    assert g.quantization is None  # F32 tensors: not a quantized file
    assert g.checkpoint_bytes == g.parameters.total * 4
    untied = tmp_path / "untied.gguf"
    write_gguf(untied, tied=False)
    u = load_model_spec(str(untied))
    assert not u.tie_word_embeddings and u.parameters.lm_head == 100 * 64
    c2 = spec_from_config(
        {**TINY, "tie_word_embeddings": False}, name="t", source=ModelSource.config_dir, ref="t"
    )
    assert u.parameters.total == c2.parameters.total


def test_gguf_in_a_directory_without_config(tmp_path: Path) -> None:
    d = tmp_path / "only-gguf"
    d.mkdir()
    write_gguf(d / "m.gguf")
    assert load_model_spec(str(d)).source == ModelSource.gguf


def test_a_file_that_is_not_gguf(tmp_path: Path) -> None:
    f = tmp_path / "bad.gguf"
    f.write_bytes(b"not a gguf file at all")
    with pytest.raises(UserInputError, match="GGUF"):
        load_model_spec(str(f))


# --------------------------------------------------------------------------------------------- presets, errors
def test_presets_by_alias_and_hub_id_any_case() -> None:
    assert load_model_spec("Qwen/Qwen2.5-7B-Instruct").name == "qwen2.5-7b-instruct"
    assert load_model_spec("QWEN2.5-7B").name == "qwen2.5-7b-instruct"
    assert load_model_spec("smollm2-135m").parameters.total == 134_515_008
    doc = preset_document("llama-3.1-8b-instruct")
    assert doc["source"].endswith("/config.json") and doc["config"]["num_hidden_layers"] == 32


def test_unknown_preset_has_a_did_you_mean() -> None:
    with pytest.raises(NotFoundError) as err:
        load_model_spec("qwen2.5-7b-instrct")
    assert "Did you mean 'qwen2.5-7b-instruct'" in err.value.message
    assert err.value.hint and "Presets:" in err.value.hint


def test_missing_path_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"No such file"):
        load_model_spec(str(tmp_path / "nope" / "model.gguf"))


def test_prepared_model_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench.settings import reset_settings_cache

    monkeypatch.setenv("ACCELBENCH_CACHE_DIR", str(tmp_path / "cache"))
    reset_settings_cache()
    write_dir(tmp_path / "cache" / "models" / "my-tiny" / "hf", TINY)
    m = load_model_spec("my-tiny")
    assert m.source == ModelSource.prepared and m.parameters.total > 0
    assert m.name == "my-tiny"  # named after the prepared model, not its hf/ directory


# --------------------------------------------------------------------------------------------- HF cache, hub
def test_hugging_face_cache_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hub"
    repo = cache / "models--acme--tiny-chat"
    rev = "0123456789abcdef0123456789abcdef01234567"
    write_dir(repo / "snapshots" / rev, TINY)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(rev)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    m = load_model_spec("acme/tiny-chat")
    assert m.source == ModelSource.hf_cache
    assert m.hf_id == "acme/tiny-chat" and m.revision == rev


class _Hub(BaseHTTPRequestHandler):
    files: ClassVar[dict[str, Any]] = {}

    def do_GET(self) -> None:  # the http.server API names it so
        body = self.files.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hub_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_online_fetch_when_the_network_is_allowed(
    hub_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelbench.settings import reset_settings_cache

    _Hub.files = {
        "/acme/online/resolve/main/config.json": {
            **TINY,
            "quantization_config": {"quant_method": "awq", "bits": 4},
        },
        "/acme/online/resolve/main/model.safetensors.index.json": {"metadata": {"total_size": 999}},
    }
    monkeypatch.setenv("HF_ENDPOINT", hub_server)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("ACCELBENCH_CACHE_DIR", str(tmp_path / "cache"))
    reset_settings_cache()
    m = load_model_spec("acme/online")
    assert m.source == ModelSource.hub and m.checkpoint_bytes == 999
    assert m.quantization is not None and m.quantization.method == "awq"
    # kept for offline use
    _Hub.files = {}
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_model_spec("acme/online").checkpoint_bytes == 999
    # a repository the hub does not have
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(NotFoundError, match=r"no config\.json"):
        load_model_spec("acme/missing")


def test_offline_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserInputError) as err:
        load_model_spec("acme/not-cached")
    assert "HF_HUB_OFFLINE" in err.value.message and err.value.hint and "preset" in err.value.hint


def test_unreachable_hub_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(UserInputError, match="no network or the hub is unreachable"):
        load_model_spec("acme/unreachable")
    # allow_network=False never tries
    with pytest.raises(NotFoundError):
        load_model_spec("acme/unreachable", allow_network=False)
