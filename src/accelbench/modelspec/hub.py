"""Model directories, the Hugging Face cache (offline) and the hub (online, config only).

- ``read_model_dir``: a local directory with ``config.json``: also reads the checkpoint size (the safetensors
  index's ``total_size``, else the weight files), sentence-transformers / diffusers markers, an old
  ``quantize_config.json`` and the README's ``pipeline_tag``.
- ``find_in_hf_cache``: the hub cache layout (``models--org--name/snapshots/<rev>/``), found through
  ``huggingface_hub`` so ``HF_HOME`` / ``HF_HUB_CACHE`` are honoured; never touches the network.
- ``fetch_from_hub``: downloads ``config.json`` (and the small metadata files) with a short timeout, only
  when the network is allowed (``HF_HUB_OFFLINE`` unset); keeps a copy under the cache dir so the next
  lookup works offline.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.errors import NotFoundError, UserInputError
from accelbench.modelspec.hf_config import CheckpointFacts
from accelbench.settings import get_settings

HUB_TIMEOUT_S = 5.0
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
META_FILES = (
    "model.safetensors.index.json",
    "modules.json",
    "config_sentence_transformers.json",
    "model_index.json",
    "quantize_config.json",
    "quant_config.json",
)


@dataclass
class DirInfo:
    """What a model directory says: its config.json, and the checkpoint's facts beside it."""

    config: dict[str, Any]
    facts: CheckpointFacts


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserInputError(f"{path}: cannot read JSON ({exc}).") from exc


def pipeline_tag_from_readme(text: str) -> str | None:
    """``pipeline_tag`` from a model card's YAML front matter."""
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    front = text[3:end] if end > 0 else ""
    m = re.search(r"^pipeline_tag:\s*['\"]?([\w\-]+)", front, re.MULTILINE)
    return m.group(1) if m else None


def read_model_dir(path: Path) -> DirInfo:
    """Read ``config.json`` and the metadata files next to it."""
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        if (path / "model_index.json").is_file():
            raise UserInputError(
                f"{path} is a diffusers pipeline (model_index.json), not a text-generation model: "
                "accelbench plans LLM serving.",
                hint="Pick a generative language model (a ...ForCausalLM checkpoint or a preset).",
            )
        raise UserInputError(
            f"{path} has no config.json.",
            hint="Point at a model directory (with config.json), a .gguf file, or use a preset name.",
        )
    config = _load_json(cfg_path)
    checkpoint_bytes = None
    index = path / "model.safetensors.index.json"
    if index.is_file():
        meta = _load_json(index).get("metadata") or {}
        if isinstance(meta.get("total_size"), int | float):
            checkpoint_bytes = int(meta["total_size"])
    if checkpoint_bytes is None:
        files = [p for p in path.glob("*.safetensors") if p.is_file()]
        if files:
            checkpoint_bytes = sum(p.stat().st_size for p in files)  # stat follows cache symlinks
    extra_quant_config = None
    for name in ("quantize_config.json", "quant_config.json"):
        if (path / name).is_file():
            extra_quant_config = _load_json(path / name)
            break
    pipeline_tag = None
    readme = path / "README.md"
    if readme.is_file():
        with contextlib.suppress(OSError):
            pipeline_tag = pipeline_tag_from_readme(readme.read_text(errors="replace")[:20000])
    facts = CheckpointFacts(
        checkpoint_bytes=checkpoint_bytes,
        pipeline_tag=pipeline_tag,
        sentence_transformers=(path / "modules.json").is_file()
        or (path / "config_sentence_transformers.json").is_file(),
        diffusers=(path / "model_index.json").is_file(),
        extra_quant_config=extra_quant_config,
    )
    return DirInfo(config=config, facts=facts)


def looks_like_repo_id(ref: str) -> bool:
    return bool(REPO_ID.match(ref)) and not ref.startswith((".", "/"))


def hf_cache_dir() -> Path:
    """The hub cache directory, read from the environment now (huggingface_hub reads it once at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def find_in_hf_cache(repo_id: str, revision: str | None = None) -> Path | None:
    """The cached snapshot directory holding ``config.json`` for ``repo_id``, or None. Offline."""
    try:
        from huggingface_hub import try_to_load_from_cache  # heavy: only when the hub cache is read
    except ImportError:  # pragma: no cover - huggingface_hub comes with tokenizers
        return None
    found = try_to_load_from_cache(repo_id, "config.json", cache_dir=hf_cache_dir(), revision=revision)
    if isinstance(found, str) and Path(found).is_file():
        return Path(found).parent
    return None


def _hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def network_allowed() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() not in ("1", "true", "yes", "on")


def _download_cache_dir(repo_id: str, revision: str | None) -> Path:

    return get_settings().cache_dir / "model-configs" / repo_id.replace("/", "--") / (revision or "main")


def fetch_from_hub(repo_id: str, revision: str | None = None, timeout: float = HUB_TIMEOUT_S) -> Path:
    """Download ``config.json`` (and small metadata files) of ``repo_id``; returns the local directory.

    Raises ``NotFoundError`` when the hub says the repository or file does not exist, and
    ``UserInputError`` when the network is off or unreachable, saying what to do instead.
    """
    target = _download_cache_dir(repo_id, revision)
    if (target / "config.json").is_file():
        return target
    alternatives = (
        "Give a local directory with config.json, a .gguf file, a preset name (`accelbench model list`), "
        "or download the model into the Hugging Face cache first."
    )
    if not network_allowed():
        raise UserInputError(
            f"Model {repo_id!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set.",
            hint=alternatives,
        )
    import httpx  # only when the network is used: keeps `load_model_spec` imports light

    headers = {}
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    rev = revision or "main"
    base = f"{_hub_endpoint()}/{repo_id}/resolve/{rev}"
    try:
        with httpx.Client(timeout=timeout, headers=headers, follow_redirects=True) as client:
            resp = client.get(f"{base}/config.json")
            if resp.status_code in (401, 403):
                raise UserInputError(
                    f"The hub refused config.json of {repo_id!r} (HTTP {resp.status_code}): the repository is "
                    "gated or private.",
                    hint="Accept its licence on the hub and set HF_TOKEN, or use a local directory.",
                )
            if resp.status_code == 404:
                raise NotFoundError(
                    f"The hub has no config.json for {repo_id!r} at revision {rev!r}.", hint=alternatives
                )
            resp.raise_for_status()
            config = resp.json()
            extras: dict[str, Any] = {}
            for name in META_FILES:
                r = client.get(f"{base}/{name}")
                if r.status_code == 200:
                    extras[name] = r.json()
            card = client.get(f"{base}/README.md")
            readme = card.text[:20000] if card.status_code == 200 else None
    except httpx.HTTPError as exc:
        raise UserInputError(
            f"Cannot fetch config.json of {repo_id!r}: no network or the hub is unreachable "
            f"({type(exc).__name__}: {exc}).",
            hint=alternatives,
        ) from exc
    except ValueError as exc:
        raise UserInputError(f"The hub returned a config.json for {repo_id!r} that is not JSON.") from exc
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(config, indent=2))
    for name, doc in extras.items():
        (target / name).write_text(json.dumps(doc, indent=2))
    if readme:
        (target / "README.md").write_text(readme)
    return target
