"""Run-level types: the sweep matrix, the YAML run spec (model, engine, target, sweep) and run status."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from accelbench.domain.capacity import CapacitySpec
from accelbench.domain.limits import (
    MAX_ARG_CHARS,
    MAX_ARGS,
    MAX_CELL_PROMPT_TOKENS,
    MAX_CONCURRENCY,
    MAX_LABEL_CHARS,
    MAX_LEVELS,
    MAX_NAME_CHARS,
    MAX_PROMPTS,
    MAX_SWEEP_REQUESTS,
    MAX_TOKENS,
    MAX_WARMUPS,
)
from accelbench.domain.load import SCHEDULE_HELP, LoadSettings
from accelbench.domain.quant import QuantizationName
from accelbench.domain.strict import StrictModel
from accelbench.redact import MASK, redact, redact_argv

#: what a quality setting may say (``bench/quality_run.py`` ``parse_quality`` reads it)
QUALITY_PATTERN = r"^(probe(:[0-9]{1,3})?|lm-eval:[A-Za-z0-9_.,-]{1,100})$"
#: the quality flag's help, for every command that takes it
QUALITY_HELP = (
    "Ask a short seeded task set at temperature 0 before the load and store its accuracy (95% interval) and "
    "greedy agreement with an earlier run of the same model: 'probe' (24 tasks), 'probe:N', or 'lm-eval:TASK' "
    "(lm-evaluation-harness, when installed)."
)


class RunStatus(enum.StrEnum):
    pending = "pending"
    deploying = "deploying"
    benchmarking = "benchmarking"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"
    interrupted = "interrupted"

    @property
    def finished(self) -> bool:
        return self in {RunStatus.completed, RunStatus.failed, RunStatus.cancelled, RunStatus.interrupted}


class CellStatus(enum.StrEnum):
    completed = "completed"
    partial = "partial"  # interrupted: some requests finished, kept and marked
    failed = "failed"


class SweepSpec(LoadSettings):
    """The matrix: input lengths x concurrency levels x repeats, num_prompts = concurrency x prompts_per_concurrency."""

    input_lens: list[int] = Field(
        default_factory=lambda: [128, 512],
        min_length=1,
        max_length=MAX_LEVELS,
        description=f"Input lengths, tokens (1 to {MAX_TOKENS:,} each).",
    )
    concurrency: list[int] = Field(
        default_factory=lambda: [1, 4],
        min_length=1,
        max_length=MAX_LEVELS,
        description=f"Concurrency levels (1 to {MAX_CONCURRENCY:,} each).",
    )
    repeats: int = Field(default=1, ge=1, le=100, description="Repeats of every cell.")
    schedule: str = Field(default="gamma", description=SCHEDULE_HELP)
    target_ci: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="Keep repeating each cell, up to repeats (the cap), until the 95% intervals of its median "
        "TPOT and TTFT are within +- this percent (judged from the second repeat on); the run records which "
        "cells reached it and which hit the cap. None: every cell gets all its repeats.",
    )
    prompts_per_concurrency: int = Field(
        default=10,
        ge=1,
        le=MAX_PROMPTS,
        description="num_prompts = concurrency x this (x turns for conversations), per cell.",
    )
    # A sweep warms the server up once, before its first cell; the first cell of a cold server would
    # otherwise carry the start-up cost (graph capture, allocator growth, page faults).
    num_warmups: int = Field(
        default=2,
        ge=0,
        le=MAX_WARMUPS,
        description="Requests sent once before the first cell and discarded (0: none).",
    )
    quality: str | None = Field(
        default=None,
        pattern=QUALITY_PATTERN,
        description="Quality measured before the load at temperature 0: 'probe' (the built-in seeded task set), "
        "'probe:N' (N tasks) or 'lm-eval:TASK' (lm-evaluation-harness, when installed); none by default.",
    )

    @field_validator("input_lens", "concurrency")
    @classmethod
    def _positive_unique(cls, v: list[int], info: ValidationInfo) -> list[int]:
        if any(x < 1 for x in v):
            raise ValueError("every value must be >= 1")
        top = MAX_TOKENS if info.field_name == "input_lens" else MAX_CONCURRENCY
        if any(x > top for x in v):
            raise ValueError(f"every value must be <= {top:,}")
        if len(set(v)) != len(v):
            raise ValueError("values must be unique")
        return v

    @model_validator(mode="after")
    def _bounded(self) -> SweepSpec:
        if self.stages and self.stages[0].concurrency is not None:
            # a concurrency plan is the cell's load: the axis has one level, the plan's peak (the cell's key)
            peak = max(st.concurrency or 0 for st in self.stages)
            if "concurrency" not in self.model_fields_set:
                self.concurrency = [peak]
            elif self.concurrency != [peak]:
                raise ValueError(
                    f"concurrency stages set each cell's requests in flight (peak {peak}): leave concurrency "
                    f"unset or give [{peak}]; to cap a plan at several levels use rate stages"
                )
        per_cell = [c * self.prompts_per_concurrency for c in self.concurrency]
        if max(per_cell) > MAX_PROMPTS:
            raise ValueError(
                f"concurrency x prompts_per_concurrency is {max(per_cell):,} requests in one cell, more than "
                f"{MAX_PROMPTS:,}; lower prompts_per_concurrency or the highest concurrency"
            )
        tokens = max(per_cell) * max(self.input_lens)
        if tokens > MAX_CELL_PROMPT_TOKENS:
            raise ValueError(
                f"the largest cell builds {tokens:,} prompt tokens ({max(per_cell):,} requests x "
                f"{max(self.input_lens):,} tokens), more than {MAX_CELL_PROMPT_TOKENS:,}; lower "
                "prompts_per_concurrency, the highest concurrency or the longest input"
            )
        total = sum(per_cell) * len(self.input_lens) * self.repeats + self.num_warmups
        if total > MAX_SWEEP_REQUESTS:
            raise ValueError(
                f"the sweep would send {total:,} requests, more than {MAX_SWEEP_REQUESTS:,}; measure fewer "
                "input lengths, concurrency levels, repeats or prompts per concurrency"
            )
        return self

    def cells(self) -> list[tuple[int, int]]:
        """(input_len, concurrency) in run order."""
        return [(i, c) for i in self.input_lens for c in self.concurrency]


class EngineSettings(StrictModel):
    """Engine knobs a spec may set; the runtime turns them into flags and environment."""

    max_model_len: int | None = Field(default=None, ge=16, description="--max-model-len / llama.cpp n_ctx.")
    kv_cache_space_gib: float | None = Field(
        default=None, gt=0, description="VLLM_CPU_KVCACHE_SPACE (CPU) in GiB."
    )
    max_num_seqs: int | None = Field(default=None, ge=1, description="--max-num-seqs.")
    max_num_batched_tokens: int | None = Field(default=None, ge=1, description="--max-num-batched-tokens.")
    tensor_parallel_size: int | None = Field(default=None, ge=1, description="--tensor-parallel-size.")
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1, description="GPU only.")
    kv_cache_dtype: str | None = Field(default=None, description="e.g. fp8 (GPU only).")
    quantization: QuantizationName = Field(
        default=None,
        description="none, fp16, fp8, int8 (w8a8), int4 (w4a8, w4a16), or a checkpoint's method (mapped per runtime).",
    )
    threads: int | None = Field(
        default=None, ge=1, description="CPU threads (llama.cpp n_threads; vLLM OMP)."
    )
    deployment_mode: Literal["single", "distributed", "disaggregated"] = Field(
        default="single", description="Multi-node modes are GPU only."
    )
    streamer_concurrency: int | None = Field(
        default=None, ge=1, le=256, description="Run:ai streamer parallel reads; default from the model size."
    )
    streamer_memory_limit_gib: float | None = Field(
        default=None, gt=0, description="Run:ai streamer CPU buffer, GiB; default 15% of the weights."
    )
    extra_args: list[Annotated[str, Field(max_length=MAX_ARG_CHARS)]] = Field(
        default_factory=list, max_length=MAX_ARGS, description="Extra engine flags, appended verbatim."
    )
    env: dict[str, Annotated[str, Field(max_length=MAX_ARG_CHARS)]] = Field(
        default_factory=dict, max_length=MAX_ARGS, description="Extra engine environment variables."
    )

    def secret_slots(self) -> dict[str, tuple[str, str]]:
        """Where the one redaction rule (``accelbench.redact``) masks something in ``extra_args`` and ``env``:
        ``arg:N`` (``extra_args[N]``: the value after ``--api-key``, ``--api-key=X``, a secret header, a URL's
        password) and ``env:NAME`` (``HF_TOKEN``, ``*_KEY``, ``*_SECRET``, ...), each with its value and its
        masked form. A value that is already the masked form (the placeholder a stored spec carries) is a
        slot too: whatever it holds, the rule would mask it."""
        slots: dict[str, tuple[str, str]] = {}
        args = list(self.extra_args)
        probe = [a.replace(MASK, "x") for a in args]  # a placeholder stands for some value: try one
        masked, probed = redact_argv(args), redact_argv(probe)
        for i, arg in enumerate(args):
            if probed[i] != probe[i]:
                slots[f"arg:{i}"] = (arg, masked[i])
        for name, value in self.env.items():
            tried = value.replace(MASK, "x")
            if redact({name: tried})[name] != tried:
                slots[f"env:{name}"] = (value, redact({name: value})[name])
        return slots


class EngineSpec(StrictModel):
    name: str = Field(
        default="vllm-cpu", description="Runtime name: vllm-cpu, llamacpp, vllm, vllm-neuron, sglang."
    )
    version: str | None = Field(default=None, description="Engine version; default from the tool versions.")
    settings: EngineSettings = Field(default_factory=EngineSettings)


class LocalTarget(StrictModel):
    kind: Literal["local"] = "local"
    host: str = Field(default="127.0.0.1", description="Interface the engine binds to.")
    port: int | None = Field(default=None, ge=1, le=65535, description="Fixed port; default a free one.")
    startup_timeout_s: float = Field(default=600.0, gt=0, description="Seconds to wait for /health.")


class EndpointTarget(StrictModel):
    """An already running OpenAI-compatible server: nothing is deployed or torn down."""

    kind: Literal["endpoint"] = "endpoint"
    base_url: str
    served_model: str | None = None
    tokenizer: str | None = None


class KubernetesTelemetry(StrictModel):
    """Where a Kubernetes run reads its accelerators' telemetry (a DCGM exporter on GPU nodes, neuron-monitor's
    Prometheus exporter on Neuron nodes). In a spec either a mode alone (``telemetry: sidecar``) or a mapping."""

    mode: Literal["auto", "node", "sidecar", "off"] = Field(
        default="auto",
        description="node: the exporter the node already runs (a DaemonSet's pod on the engine's node, found by "
        "label); sidecar: an exporter container in the engine pod; off: none; auto (default): node when the "
        "cluster runs such an exporter, else sidecar (an exported bundle, which cannot ask the cluster: sidecar).",
    )
    namespace: str | None = Field(
        default=None,
        max_length=63,
        description="Namespace of the node exporter's pods; default by tier: gpu-operator (the GPU Operator's "
        "DCGM exporter), neuron-monitor (AWS's neuron-monitor DaemonSet).",
    )
    selector: str | None = Field(
        default=None,
        max_length=MAX_NAME_CHARS,
        description="Label selector of the node exporter's pods; default by tier: app=nvidia-dcgm-exporter, "
        "app=neuron-monitor.",
    )
    port: int | None = Field(
        default=None, ge=1, le=65535, description="The node exporter's port; default by tier: 9400, 8000."
    )
    image: str | None = Field(
        default=None, max_length=MAX_NAME_CHARS, description="The sidecar's image; default by tier."
    )

    @model_validator(mode="before")
    @classmethod
    def _mode_alone(cls, data: Any) -> Any:
        return {"mode": data} if isinstance(data, str) else data

    @field_validator("selector")
    @classmethod
    def _selector(cls, v: str | None) -> str | None:
        if v is not None and not all(p.count("=") == 1 and all(p.split("=")) for p in v.split(",")):
            raise ValueError(
                f"selector {v!r} must be label=value pairs separated by commas, e.g. app=dcgm-exporter"
            )
        return v


class KubernetesTarget(StrictModel):
    kind: Literal["kubernetes"] = "kubernetes"
    telemetry: KubernetesTelemetry = Field(
        default_factory=KubernetesTelemetry,
        description="Accelerator telemetry: auto | node | sidecar | off, or a mapping with namespace, selector, "
        "port and image.",
    )
    namespace: str = "accelbench"
    kubeconfig: str | None = Field(default=None, description="Path; default in-cluster or ~/.kube/config.")
    context: str | None = None
    loadgen_shards: int = Field(default=1, ge=1, le=64, description="Load-generator pods.")
    ready_timeout_s: float | None = Field(default=None, gt=0, description="Default per accelerator tier.")
    loadgen_timeout_s: float = Field(default=7200.0, gt=0)
    image: str | None = Field(default=None, description="accelbench image for the load-generator Job.")


class Ec2Target(StrictModel):
    kind: Literal["ec2"] = "ec2"
    region: str = "us-east-1"
    endpoint_url: str | None = Field(default=None, description="EC2-compatible API endpoint; default AWS.")
    ami_id: str | None = None
    subnet_id: str | None = None
    security_group_ids: list[str] = Field(default_factory=list)
    key_name: str | None = None
    ready_timeout_s: float = Field(default=1800.0, gt=0)
    ingress_cidr: str | None = Field(
        default=None,
        description="CIDR allowed to reach the server's port when accelbench creates the security group "
        "(needed when security_group_ids is empty), e.g. your address/32.",
    )
    use_public_ip: bool = Field(default=True, description="Reach the server on its public IP (else private).")
    max_lifetime_s: float = Field(
        default=4 * 3600.0,
        gt=0,
        description="The instance terminates itself after this long even if accelbench is gone.",
    )


Target = Annotated[LocalTarget | EndpointTarget | KubernetesTarget | Ec2Target, Field(discriminator="kind")]


class RunSpec(StrictModel):
    """What ``accelbench run SPEC.yaml`` (and POST /api/v1/runs) executes."""

    label: str | None = Field(default=None, max_length=MAX_LABEL_CHARS, description="A name for the run.")
    model: str = Field(
        min_length=1, max_length=MAX_NAME_CHARS, description="Model name (preset or prepared) or a path."
    )
    revision: str | None = Field(default=None, description="Pinned model revision, when known.")
    instance_type: str | None = Field(
        default=None, description="Catalog instance type; local runs describe this machine."
    )
    engine: EngineSpec = Field(default_factory=EngineSpec)
    target: Target = Field(default_factory=LocalTarget)
    sweep: SweepSpec = Field(default_factory=SweepSpec)
    capacity: CapacitySpec | None = Field(
        default=None,
        description="Search for the highest load meeting an SLO (or the knee) instead of sweeping.",
    )
    isa_trace: bool = Field(
        default=False, description="Run the engine with oneDNN's verbose trace (timings not comparable)."
    )
    quality: str | None = Field(
        default=None,
        pattern=QUALITY_PATTERN,
        description="Quality measured before the sweep: 'probe', 'probe:N' or 'lm-eval:TASK' (the sweep's "
        "quality setting, which it fills).",
    )
    hf_token: str | None = Field(
        default=None, description="Secret; never stored or returned.", repr=False, exclude=True
    )

    @model_validator(mode="after")
    def _check(self) -> RunSpec:
        if not self.model.strip():
            raise ValueError("model must not be empty")
        if self.capacity is not None and "sweep" in self.model_fields_set:
            raise ValueError(
                "a run measures either a sweep or a capacity search, not both; remove sweep or capacity"
            )
        if self.quality is not None:
            if self.capacity is not None:
                raise ValueError("a capacity search does not measure quality yet; remove quality or capacity")
            if self.sweep.quality not in (None, self.quality):
                raise ValueError(
                    f"quality is {self.quality!r} but sweep.quality {self.sweep.quality!r}; give one"
                )
            if self.sweep.quality is None:
                self.sweep = self.sweep.model_copy(update={"quality": self.quality})
        return self

    def public_dict(self) -> dict[str, Any]:
        """The spec as stored: ``hf_token`` removed, every secret in the engine's ``extra_args`` and ``env``
        replaced by the masked placeholder (``secrets()`` holds the values, which never reach the store or the
        run files), and a capacity search's unused sweep left out, so it loads again."""
        exclude = {"hf_token", "sweep"} if self.capacity is not None else {"hf_token"}
        data = self.model_dump(mode="json", exclude=exclude)
        settings = data["engine"]["settings"]
        for slot, (_value, masked) in self.engine.settings.secret_slots().items():
            kind, _, where = slot.partition(":")
            if kind == "arg":
                settings["extra_args"][int(where)] = masked
            else:
                settings["env"][where] = masked
        return data

    def secrets(self) -> dict[str, str]:
        """Every secret this spec carries, by where it goes back: ``hf_token``, ``arg:N``, ``env:NAME``
        (placeholders left out: they hold no secret). What submitting a run keeps in memory."""
        found = {
            slot: value
            for slot, (value, masked) in self.engine.settings.secret_slots().items()
            if value != masked
        }
        if self.hf_token:
            found["hf_token"] = self.hf_token
        return found

    def secret_placeholders(self) -> list[str]:
        """The slots that hold the masked placeholder in place of a secret (a spec read back from the store)."""
        return [
            slot for slot, (value, masked) in self.engine.settings.secret_slots().items() if value == masked
        ]

    def with_secrets(self, secrets: Mapping[str, str]) -> RunSpec:
        """This spec with ``secrets`` (as ``secrets()`` gives them) put back in their slots."""
        settings = self.engine.settings
        args, env = list(settings.extra_args), dict(settings.env)
        for slot, value in secrets.items():
            kind, _, where = slot.partition(":")
            if kind == "arg" and where.isdigit() and int(where) < len(args):
                args[int(where)] = value
            elif kind == "env" and where in env:
                env[where] = value
        engine = self.engine.model_copy(
            update={"settings": settings.model_copy(update={"extra_args": args, "env": env})}
        )
        update: dict[str, Any] = {"engine": engine}
        if secrets.get("hf_token"):
            update["hf_token"] = secrets["hf_token"]
        return self.model_copy(update=update)


def secret_slot_name(slot: str) -> str:
    """Where a secret slot is in a run spec, for people: ``engine.settings.extra_args[3]``,
    ``engine.settings.env.HF_TOKEN``, ``hf_token``."""
    kind, _, where = slot.partition(":")
    if kind == "arg":
        return f"engine.settings.extra_args[{where}]"
    if kind == "env":
        return f"engine.settings.env.{where}"
    return slot


class DryRunCell(StrictModel):
    """One cell a run will measure."""

    input_len: int = Field(description="Input tokens per prompt.")
    concurrency: int = Field(description="Requests in flight.")
    repeats: int = Field(description="How many times the cell is measured.")
    requests: int = Field(description="Requests per repeat (warm-ups excluded).")
    predicted_s: float | None = Field(
        default=None, description="Predicted seconds per repeat (requests / predicted requests per second)."
    )


class DryRunCapacity(StrictModel):
    """What a capacity search will do (a run spec's ``capacity:`` section), in place of sweep cells."""

    load: str = Field(description="concurrency (closed loop) or request_rate.")
    slo: str | None = Field(default=None, description="The targets it judges; None: it looks for the knee.")
    start: float = Field(description="The first level measured.")
    start_from: str = Field(
        description="Where the first level comes from (the spec, the planner, the default)."
    )
    max_load: float = Field(description="The highest level it will try.")
    max_probes: int = Field(description="The most levels it measures (re-measures included).")
    requests_per_level: int = Field(description="Requests judged at each level (steady state).")
    requests_at_most: int = Field(
        description="Requests it can send at most: max_probes levels at max_load (warm-ups excluded)."
    )
    predicted_max_load: float | None = Field(default=None, description="The planner's capacity at the SLO.")


class DryRun(StrictModel):
    """What a run would deploy and measure, resolved and checked, with nothing stored or started."""

    dry_run: Literal[True] = Field(default=True, description="Always true: nothing was stored or started.")
    model: str = Field(description="The model, as the spec names it.")
    runtime: str = Field(description="The runtime (the tier's default when the spec names none).")
    engine_version: str = Field(description="Engine version.")
    target: str = Field(description="local, endpoint, kubernetes or ec2.")
    instance_type: str | None = Field(default=None, description="Instance type (catalog spelling).")
    accelerator_type: str = Field(description="gpu, neuron or cpu.")
    image: str | None = Field(default=None, description="Container image (container targets).")
    argv: list[str] = Field(description="The exact engine command (container targets: its arguments).")
    env: dict[str, str] = Field(description="The engine's environment (secret-looking values masked).")
    warnings: list[str] = Field(default_factory=list, description="What the guards and the planner warn of.")
    cells: list[DryRunCell] = Field(description="The sweep's cells, in order (none for a capacity search).")
    capacity: DryRunCapacity | None = Field(
        default=None, description="What the capacity search will do, for a spec with a capacity: section."
    )
    requests: int = Field(description="Requests over the whole sweep (warm-ups excluded).")
    predicted_duration_s: float | None = Field(
        default=None,
        description="Predicted seconds of load: every cell x repeat plus the warm-ups (engine start-up and "
        "model download not included). None when the planner cannot predict this deployment.",
    )
    hourly_usd: float | None = Field(default=None, description="The instance's price per hour, when known.")
    predicted_cost_usd: float | None = Field(
        default=None, description="hourly_usd x predicted_duration_s (what the load itself costs)."
    )
    prediction_notes: list[str] = Field(default_factory=list, description="How the prediction was made.")
