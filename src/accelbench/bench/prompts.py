"""What a dataset makes: the prompts of one benchmark (``PromptSource``, made lazily; ``Dataset``, all at once)
and the registry of the dataset builders (``DATASETS``), each a function of (config, tokenizer, count, warmups).
A config names its dataset (``LoadSettings.dataset``); ``check_dataset`` refuses a name nothing registered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from accelbench.bench.tokenizer import Tokenizer
from accelbench.domain.load import BenchConfig
from accelbench.errors import NotFoundError, UserInputError
from accelbench.registry import Registry


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt to send, with the prompt tokens the server is expected to count (None: no tokenizer)."""

    text: str
    prompt_len: int | None = None
    max_tokens: int | None = None  # this request's output length; None = the config's output_len
    group: int | None = None  # shared-prefix group


@dataclass
class Dataset:
    """Prompts for the measured requests and for the warmup, plus notes for the result (all made up front:
    ``build_dataset``; a benchmark takes them one by one from a ``PromptSource`` instead)."""

    prompts: list[Prompt]
    warmups: list[Prompt] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    shared_prefix_tokens: int = 0  # tokens every prompt shares (deliberate prefix + chat template front)
    group_prefix_tokens: list[int] = field(default_factory=list)  # per prefix group: tokens its prompts share
    expected_prefix_hit_rate: float | None = None  # see PromptSource


#: A function the source calls between prompts (and between rounds of tokenizer work): True means stop.
StopFn = Callable[[], bool]
#: Prompts a source makes per round of tokenizer work (one batch call); a stop is seen between rounds.
PROMPT_CHUNK = 16


def _never() -> bool:
    return False


@dataclass
class PromptSource:
    """The prompts of one benchmark, made lazily: ``stream()`` yields the ``num_warmups`` warmup prompts, then
    the ``count`` measured ones, each made (tokenizer work included) only when the consumer asks for it, at
    most ``chunk`` at a time. What is known before any prompt is made (the counts, the shared prefix) is here
    up front; ``notes`` may grow while prompts are made (read them once the stream is done). The prompts
    depend on the config's seed only: the same for any chunk size, consumer speed or look-ahead."""

    count: int
    num_warmups: int
    make: Callable[[int, StopFn], Iterator[Prompt]]  # (chunk, stop) -> warmups then measured prompts
    notes: list[str] = field(default_factory=list)
    shared_prefix_tokens: int = 0
    made: int = 0  # prompts made so far (handed to the consumer)
    #: send times of the measured prompts, seconds from the start (a trace's); None = from the config's rate
    offsets: list[float] | None = None
    #: the prefix-cache hit ratio the prompts should give a server that caches every shared block (None: unknown)
    expected_prefix_hit_rate: float | None = None
    #: per prefix group (random dataset): the leading tokens every prompt of the group shares
    group_prefix_tokens: list[int] = field(default_factory=list)
    #: the OpenAI tools every chat request carries (``config.tools`` loaded and checked); None: no tools
    tools: list[dict[str, Any]] | None = None
    #: about how many bytes a prompt's text takes (the memory a cell's requests need); None: not known
    approx_prompt_bytes: float | None = None

    @property
    def total(self) -> int:
        return self.count + self.num_warmups

    def stream(self, *, chunk: int = PROMPT_CHUNK, stop: StopFn | None = None) -> Iterator[Prompt]:
        """Warmups then measured prompts; ends early (without making the rest) once ``stop()`` is true."""
        halt = stop or _never
        for p in self.make(max(1, chunk), halt):
            if halt():
                return
            self.made += 1
            yield p


DatasetBuilder = Callable[[BenchConfig, "Tokenizer | None", int, int], PromptSource]
#: the dataset builders by name; the shipped modules (each registers its own) are imported on the first lookup,
#: another one is ``DATASETS.add_module("pkg.module")``
DATASETS: Registry[DatasetBuilder] = Registry(
    "dataset",
    ["accelbench.bench.random_prompts", "accelbench.bench.file_datasets", "accelbench.bench.trace"],
)
#: the shipped datasets that read ``dataset_path``: a benchmark naming one without it is refused before it starts
#: (a dataset of your own that reads a file refuses a missing one when it is opened: ``file_datasets.need_path``)
FILE_DATASETS = frozenset({"jsonl", "sharegpt", "trace"})


def check_dataset(name: str, where: str | None = None) -> DatasetBuilder:
    """The builder registered as ``name``. A name no module registered is bad input (exit 2), refused with the
    registered names it could have meant and the whole list; ``where`` is the key or flag it was given as."""
    try:
        return DATASETS.get(name)
    except NotFoundError as exc:
        raise UserInputError(f"{where}: {exc.message}" if where else exc.message, hint=exc.hint) from None
