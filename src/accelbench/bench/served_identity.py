"""What a run served: the model's identity, precision, lengths, engine features and the sampling the client sent.

Two runs can only be compared when they served the same thing. ``served_identity`` gathers, for one endpoint,
every field ``FIELDS`` names, each as ``{"value": ..., "source": ...}`` where the source says where it was read:

- ``/v1/models``: the served name, the model's ``root`` (where the server loaded it from) and ``max_model_len``
  (vLLM);
- ``/metrics``: vLLM's info gauge ``vllm:cache_config_info`` (the KV cache dtype, prefix caching), and
  speculative decoding when its counters are present;
- the launch command of a local or Kubernetes deployment (``--dtype``, ``--quantization``, ``--kv-cache-dtype``,
  ``--max-model-len``, ``--revision``, prefix caching, chunked prefill, ``--speculative-config``; llama.cpp's
  ``--n_ctx``);
- the model directory when ``root`` is readable here: a hash of ``config.json``, of the tokenizer files and of the
  chat template, and the checkpoint's quantization;
- the engine and version the environment probe found, and the sampling parameters the client sent.

What the server reports wins over the launch command, which wins over the files. A field nobody reports stays
``{"value": None, "source": None}``: unknown, never guessed. The result is stored as the run's ``extra["served"]``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from accelbench.bench.recorder import RunNotes
from accelbench.domain.endpoint import Endpoint

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 10.0
#: every field, in the order a comparison lists them, with the words it uses for each
FIELDS: dict[str, str] = {
    "served_model": "served model name",
    "model_root": "model loaded from",
    "model_revision": "model revision",
    "config_hash": "model config (hash)",
    "tokenizer_hash": "tokenizer (hash)",
    "chat_template_hash": "chat template (hash)",
    "weights_dtype": "weights dtype",
    "quantization": "weights quantization",
    "kv_cache_dtype": "KV cache dtype",
    "max_model_len": "max model length",
    "prefix_caching": "prefix caching",
    "chunked_prefill": "chunked prefill",
    "speculative_decoding": "speculative decoding",
    "engine": "engine",
    "engine_version": "engine version",
    "sampling": "sampling parameters",
}
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}
_LAUNCH_VALUES = {
    "--dtype": "weights_dtype",
    "--quantization": "quantization",
    "-q": "quantization",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--max-model-len": "max_model_len",
    "--n_ctx": "max_model_len",
    "--revision": "model_revision",
    "--speculative-config": "speculative_decoding",
    "--speculative-model": "speculative_decoding",
}
_LAUNCH_SWITCHES = {
    "--enable-prefix-caching": ("prefix_caching", True),
    "--no-enable-prefix-caching": ("prefix_caching", False),
    "--enable-chunked-prefill": ("chunked_prefill", True),
    "--no-enable-chunked-prefill": ("chunked_prefill", False),
}
_LABELS = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _field(value: Any, source: str | None) -> dict[str, Any]:
    return {"value": value, "source": source if value is not None else None}


def _bool(text: str) -> bool | None:
    return {"true": True, "false": False}.get(text.strip().lower())


def from_models_listing(data: Any, served_model: str) -> dict[str, Any]:
    """Fields from ``/v1/models``' JSON: the entry named ``served_model`` (its ``root``, ``max_model_len``)."""
    entries = data.get("data") if isinstance(data, Mapping) else None
    entry = next((e for e in entries or [] if isinstance(e, Mapping) and e.get("id") == served_model), None)
    if entry is None:
        return {}
    out: dict[str, Any] = {"served_model": entry["id"]}
    if isinstance(entry.get("root"), str) and entry["root"]:
        out["model_root"] = entry["root"]
    if isinstance(entry.get("max_model_len"), int):
        out["max_model_len"] = entry["max_model_len"]
    return out


def from_metrics_text(text: str) -> dict[str, Any]:
    """Fields from a Prometheus ``/metrics`` page: vLLM's ``cache_config_info`` labels, speculative decoding."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith("vllm:cache_config_info{"):
            labels = dict(_LABELS.findall(line))
            dtype = labels.get("cache_dtype")
            if dtype:
                out["kv_cache_dtype"] = dtype
            caching = _bool(labels.get("enable_prefix_caching", ""))
            if caching is not None:
                out["prefix_caching"] = caching
        elif line.startswith("vllm:spec_decode_num_drafts") and "speculative_decoding" not in out:
            out["speculative_decoding"] = "on"  # the counters exist only when a draft method is configured
    return out


def from_launch(argv: Sequence[str]) -> dict[str, Any]:
    """Fields from an engine's launch command (vLLM's flags, llama.cpp server's ``--n_ctx``)."""
    out: dict[str, Any] = {}
    args = list(argv)
    for i, arg in enumerate(args):
        name, eq, inline = arg.partition("=")
        if name in _LAUNCH_SWITCHES:
            key, value = _LAUNCH_SWITCHES[name]
            out[key] = value
        elif name in _LAUNCH_VALUES:
            value_text = inline if eq else (args[i + 1] if i + 1 < len(args) else None)
            if value_text is None:
                continue
            key = _LAUNCH_VALUES[name]
            if key == "max_model_len":
                out[key] = int(value_text) if value_text.isdigit() else value_text
            elif key == "weights_dtype":
                out[key] = _DTYPES.get(value_text, value_text)
            else:
                out[key] = value_text
    return out


def _hash_files(paths: Sequence[Path]) -> str | None:
    present = [p for p in paths if p.is_file()]
    if not present:
        return None
    digest = hashlib.sha256()
    for p in present:
        digest.update(p.name.encode() + b"\0" + p.read_bytes())
    return digest.hexdigest()[:16]


def from_model_dir(root: str) -> dict[str, Any]:
    """Fields from a model directory readable here: hashes of the config, the tokenizer and its chat template,
    and the checkpoint's own quantization (``quantization_config.quant_method``)."""
    path = Path(root)
    if not path.is_dir():
        return {}
    out: dict[str, Any] = {}
    config = path / "config.json"
    if (digest := _hash_files([config])) is not None:
        out["config_hash"] = digest
        try:
            quant = (json.loads(config.read_text()).get("quantization_config") or {}).get("quant_method")
        except (OSError, ValueError, AttributeError):
            quant = None
        if isinstance(quant, str):
            out["quantization"] = quant
    tok = _hash_files([path / n for n in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")])
    if tok is not None:
        out["tokenizer_hash"] = tok
    template: str | None = None
    jinja = path / "chat_template.jinja"
    if jinja.is_file():
        template = jinja.read_text()
    else:
        try:
            found = json.loads((path / "tokenizer_config.json").read_text()).get("chat_template")
            template = found if isinstance(found, str) else json.dumps(found) if found else None
        except (OSError, ValueError, AttributeError):
            template = None
    if template:
        out["chat_template_hash"] = hashlib.sha256(template.encode()).hexdigest()[:16]
    return out


def sampling_of(settings: Any) -> dict[str, Any]:
    """The sampling parameters the load generator sends with ``settings`` (a ``BenchConfig`` or ``SweepSpec``):
    the route, max_tokens, temperature (absent: the server's default) and ignore_eos."""
    dist = getattr(settings, "output_dist", None)
    kind = str(getattr(dist, "kind", "fixed") or "fixed")
    max_tokens = getattr(settings, "output_len", None)
    temperature = getattr(settings, "temperature", None)
    return {
        "api": str(getattr(settings, "endpoint", "chat")),
        "max_tokens": max_tokens if kind == "fixed" else f"drawn ({kind}, around {max_tokens})",
        "temperature": "server default" if temperature is None else temperature,
        "ignore_eos": bool(getattr(settings, "ignore_eos", False)),
    }


def _get(client: httpx.Client, url: str) -> httpx.Response | None:
    try:
        resp = client.get(url)
    except httpx.HTTPError:
        return None
    return resp if resp.status_code == 200 else None


def probe_server(
    endpoint: Endpoint, timeout: float = PROBE_TIMEOUT_S
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fields from ``/v1/models``, fields from ``/metrics``) of a running server; empty where it says nothing."""
    root = endpoint.base_url.rstrip("/").removesuffix("/v1")
    headers = endpoint.request_headers()
    listing: dict[str, Any] = {}
    metrics: dict[str, Any] = {}
    with httpx.Client(timeout=timeout, headers=headers) as client:
        resp = _get(client, root + "/v1/models")
        if resp is not None:
            try:
                listing = from_models_listing(resp.json(), endpoint.served_model)
            except ValueError:
                listing = {}
        resp = _get(client, root + "/metrics")
        if resp is not None:
            metrics = from_metrics_text(resp.text)
    return listing, metrics


def served_identity(
    endpoint: Endpoint | None,
    *,
    launch: Sequence[str] | str | None = None,
    sampling: Mapping[str, Any] | None = None,
    engine: Mapping[str, Any] | None = None,
    served_model: str | None = None,
) -> dict[str, Any]:
    """Every field of ``FIELDS`` as ``{"value", "source"}``: the server (when ``endpoint`` is reachable from here),
    the ``launch`` command, the model directory the server names, the ``engine`` probe and the ``sampling``."""
    layers: list[tuple[str, dict[str, Any]]] = []
    if endpoint is not None:
        listing, metrics = probe_server(endpoint)
        layers += [("/v1/models", listing), ("/metrics (vllm:cache_config_info)", metrics)]
    if launch:
        argv = shlex.split(launch) if isinstance(launch, str) else list(launch)
        layers.append(("launch command", from_launch(argv)))
    root = next((fields["model_root"] for _, fields in layers if fields.get("model_root")), None)
    if isinstance(root, str):
        layers.append((f"model files ({Path(root).name})", from_model_dir(root)))
    eng = engine or {}
    layers.append(
        (
            "engine probe",
            {"engine": eng.get("name"), "engine_version": eng.get("version") or eng.get("installed")},
        )
    )
    layers.append(("client", {"served_model": served_model or (endpoint.served_model if endpoint else None)}))
    if sampling is not None:
        layers.append(("client settings", {"sampling": dict(sampling)}))
    out: dict[str, Any] = {}
    for name in FIELDS:
        value, source = None, None
        for where, fields in layers:
            if fields.get(name) is not None:
                value, source = fields[name], where
                break
        out[name] = _field(value, source)
    return out


def served_value(served: Mapping[str, Any] | None, name: str) -> Any:
    """A stored field's value (None when unknown or not recorded)."""
    entry = (served or {}).get(name)
    return entry.get("value") if isinstance(entry, Mapping) else None


def record_served(
    store: RunNotes, run_id: str, endpoint: Endpoint | None, *, sampling: Mapping[str, Any]
) -> None:
    """Store what run ``run_id`` serves in its ``extra["served"]``: the server (``endpoint``, None when it cannot
    be reached from here), the launch command its deployment kept, the engine its environment names. Never
    raises: what a run served is context for comparisons, never a reason to fail it (the reason is logged)."""
    try:
        run = store.get_run(run_id)
        launch = ((run.extra or {}).get("deployment") or {}).get("command") or None
        engine = (run.environment or {}).get("engine") or {"name": run.engine, "version": run.engine_version}
        if endpoint is not None and not (engine.get("name") or engine.get("version")):
            # start-up: report/ and web/ read FIELDS from here; the host probes (psutil) load only when a run
            # must ask its engine (a bench stores its environment after the load)
            from accelbench.telemetry.host import engine_info

            engine = engine_info(endpoint.base_url, headers=endpoint.headers)
        served = served_identity(
            endpoint, launch=launch, sampling=sampling, engine=engine, served_model=run.served_model
        )
        store.merge_run_extra(run_id, served=served)
    except Exception as exc:
        log.warning("run %s: what it serves could not be recorded: %s", run_id, exc)
