"""Convert a GGUF checkpoint into a Hugging Face directory in BF16 safetensors that vLLM loads correctly.

This file runs as a script with the *engine's* Python (it needs torch, transformers, gguf and safetensors,
which live in the engine's environment, not in accelbench's): ``ENGINE_PYTHON gguf_to_hf.py --gguf FILE
--out DIR [--check QUESTION]``. It must not import accelbench.

Each of these three traps makes vLLM load the result silently and answer with random words:
1. the config keeps ``quantization_config`` (from the GGUF) or lacks ``architectures``;
2. tied embeddings saved as only ``lm_head.weight`` (what a shared-tensor-aware save keeps), which vLLM
   skips for tied models, leaving ``model.embed_tokens.weight`` uninitialised;
3. no tokenizer beside the weights (it also carries the chat template).

Progress goes to stdout as JSON lines ``{"phase": ...}``; the last line is ``{"result": {...}}``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def _say(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def convert(gguf: Path, out: Path) -> dict[str, Any]:

    t0 = time.monotonic()
    _say(phase=f"Loading {gguf.name} with transformers {transformers.__version__} (dequantising to BF16)")
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model.eval()

    _say(phase="Writing BF16 safetensors, config and tokenizer")
    out.mkdir(parents=True, exist_ok=True)
    config = model.config.to_dict()
    # Trap 1: the GGUF quantization config must not survive; vLLM reads it and misloads the weights.
    config.pop("quantization_config", None)
    arch = type(model).__name__
    config["architectures"] = [arch]
    config["torch_dtype"] = "bfloat16"
    config["dtype"] = "bfloat16"
    tied = bool(config.get("tie_word_embeddings", False))

    # Trap 2: a copy of every tensor (no shared storage), so the embeddings are written under their own name
    # even when lm_head shares them. For a tied model lm_head is left out: vLLM ignores it and ties itself.
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in model.state_dict().items():
        if tied and name == "lm_head.weight":
            continue
        tensors[name] = tensor.detach().to(torch.bfloat16).contiguous().clone()
    embed_names = [n for n in tensors if n.endswith("embed_tokens.weight")]
    if not embed_names:
        raise SystemExit(f"conversion error: no embed_tokens weight among {sorted(tensors)[:5]}...")
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True, default=str))
    if model.generation_config is not None:
        model.generation_config.save_pretrained(str(out))
    # Trap 3: the tokenizer (and its chat template) next to the weights.
    tokenizer.save_pretrained(str(out))
    if not getattr(tokenizer, "chat_template", None):
        _say(warning="the tokenizer has no chat template; the chat endpoint will not work")

    params = sum(t.numel() for t in tensors.values())
    return {
        "architecture": arch,
        "model_type": config.get("model_type"),
        "tie_word_embeddings": tied,
        "parameters": params,
        "tensors": len(tensors),
        "vocab_size": config.get("vocab_size"),
        "max_position_embeddings": config.get("max_position_embeddings"),
        "has_chat_template": bool(getattr(tokenizer, "chat_template", None)),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "seconds": round(time.monotonic() - t0, 1),
    }


def answer(model_dir: Path, question: str, max_new_tokens: int) -> str:
    """Ask the converted directory (not the GGUF) a question with transformers, greedy decoding."""

    _say(phase="Asking the converted model a question (transformers)")
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16)
    model.eval()
    messages = [{"role": "user", "content": question}]
    inputs = tok.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    new = out[0][inputs["input_ids"].shape[1] :]
    return str(tok.decode(new, skip_special_tokens=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--check", default=None, help="A question to ask the converted model.")
    ap.add_argument("--max-new-tokens", type=int, default=40)
    args = ap.parse_args(argv)
    result: dict[str, Any] = {"gguf_sha256": _sha256(args.gguf)}
    result.update(convert(args.gguf, args.out))
    if args.check:
        result["answer"] = answer(args.out, args.check, args.max_new_tokens)
    _say(result=result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
