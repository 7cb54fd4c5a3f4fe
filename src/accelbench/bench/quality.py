"""The quality probe: a short seeded set of exactly checkable tasks, sent at temperature 0 before the load.

A fast server that answers wrongly is not faster at the same job. Before a run measures speed, ``run_probe``
asks the served model a few small questions whose answers can be checked exactly, generated from a seed so no
data set is downloaded and two runs with the same seed send the same prompts:

- ``arithmetic``: the sum of two one-digit numbers (the number after the answer's last "=", else its first);
- ``copy``: repeat a common word (the word must appear, in any case);
- ``reverse``: two common words said in reverse order (of the two, the second must be named first);
- ``kth_item``: the first or second item of a list of four common words (the first list word named must be it);
- ``format``: a word written inside double quotes (the quoted word must appear).

The tasks are easy on purpose: a small model answers most of them, so a deployment that answers few (filler text,
a broken quantization, a wrong chat template) stands out, and the answers are short enough to compare token by
token between runs. None of the words, digits or quotes appear in filler such as "alpha bravo charlie".

Requests go to the chat (or completions) route, not streamed, at temperature 0 with few output tokens, several
at once, so the probe stays short beside the load. The result is the run's ``quality`` JSON: ``tasks``,
``correct``, ``accuracy`` with its 95% Wilson interval (``wilson``), ``by_task`` (each kind's tally), the
``items`` scored one by one, and each answer's leading tokens (``answers``) so a later run of the same model on
the same prompts can state its greedy agreement with this one (``agreement``). The server's own tokens are used
when it returns them (vLLM's ``logprobs``), else the answer's words; ``agreement_unit`` says which.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from accelbench.domain.endpoint import Endpoint
from accelbench.errors import UserInputError

PROBE_VERSION = 2
DEFAULT_TASKS = 24
MAX_TASKS = 200
MAX_TOKENS = 12
CONCURRENCY = 8
TIMEOUT_S = 60.0
KINDS = ("arithmetic", "copy", "reverse", "kth_item", "format")
#: common words for the lists; none of them is a digit string, so a wrong list answer is never a right sum
WORDS = (
    "apple", "river", "stone", "cloud", "lamp", "tiger", "bread", "chair", "green", "music",
    "ocean", "pencil", "window", "garden", "silver", "rabbit", "candle", "forest", "butter", "mirror",
    "horse", "table", "orange", "paper", "yellow", "button", "rocket", "bottle", "flower", "castle",
)  # fmt: skip
ORDINALS = {1: "first", 2: "second"}
_NUMBER = re.compile(r"-?\d+")
_PIECE = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class QualityTask:
    """One probe question: its id, kind, prompt and the answer it is checked against."""

    id: str
    kind: str
    prompt: str
    expected: str
    choices: tuple[str, ...] = ()


def _arithmetic(rng: random.Random, i: int) -> QualityTask:
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    return QualityTask(
        f"arithmetic-{i}", "arithmetic", f"What is {a} + {b}? Answer with the number only.", str(a + b)
    )


def _copy(rng: random.Random, i: int) -> QualityTask:
    word = rng.choice(WORDS)
    return QualityTask(f"copy-{i}", "copy", f'Repeat the word "{word}".', word)


def _reverse(rng: random.Random, i: int) -> QualityTask:
    first, second = rng.sample(WORDS, 2)
    prompt = f"Say these two words in reverse order: {first}, {second}"
    return QualityTask(f"reverse-{i}", "reverse", prompt, f"{second} {first}", (first, second))


def _kth_item(rng: random.Random, i: int) -> QualityTask:
    items = tuple(rng.sample(WORDS, 4))
    k = rng.randint(1, 2)
    prompt = f"List: {', '.join(items)}. The {ORDINALS[k]} item is"
    return QualityTask(f"kth_item-{i}", "kth_item", prompt, items[k - 1], items)


def _format(rng: random.Random, i: int) -> QualityTask:
    word = rng.choice(WORDS)
    return QualityTask(f"format-{i}", "format", f"Write the word {word} inside double quotes.", f'"{word}"')


_MAKERS = {
    "arithmetic": _arithmetic,
    "copy": _copy,
    "reverse": _reverse,
    "kth_item": _kth_item,
    "format": _format,
}


def make_tasks(seed: int = 0, count: int = DEFAULT_TASKS) -> list[QualityTask]:
    """``count`` tasks, the kinds in turn, every one drawn from ``seed``: the same list on every machine."""
    if not 1 <= count <= MAX_TASKS:
        raise UserInputError(f"The quality probe takes 1 to {MAX_TASKS} tasks, not {count}.")
    rng = random.Random(f"accelbench-quality-{PROBE_VERSION}-{seed}")
    tasks: list[QualityTask] = []
    seen: set[str] = set()
    for i in range(count):
        make = _MAKERS[KINDS[i % len(KINDS)]]
        task = make(rng, i)
        for _ in range(20):  # a prompt asked twice tells nothing new; a long set may have to repeat some
            if task.prompt not in seen:
                break
            task = make(rng, i)
        seen.add(task.prompt)
        tasks.append(task)
    return tasks


def score(task: QualityTask, answer: str) -> bool:
    """Whether ``answer`` is right for ``task`` (the rules in the module docstring)."""
    text = answer.strip()
    if task.kind == "arithmetic":  # the number after the last "=" when the answer writes the sum out
        m = _NUMBER.search(text.rsplit("=", 1)[-1])
        return m is not None and m.group(0) == task.expected
    if task.kind == "format":
        return task.expected.lower() in text.replace("\u201c", '"').replace("\u201d", '"').lower()
    named = [w for w in re.findall(r"[a-z]+", text.lower()) if w in task.choices]
    if task.kind == "kth_item":
        return bool(named) and named[0] == task.expected
    if task.kind == "reverse":
        second, first = task.expected.split(" ")
        return bool(named) and named[0] == second and first in named[1:]
    return re.search(rf"\b{re.escape(task.expected)}\b", text, re.IGNORECASE) is not None


def wilson(correct: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of ``correct`` successes in ``total`` trials (95% for z = 1.96): unlike the
    normal approximation it stays inside [0, 1] and is not zero-width at 0 or at ``total``."""
    if total <= 0:
        return 0.0, 1.0
    p = correct / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def pieces(text: str) -> list[str]:
    """An answer cut into words and punctuation: the unit of agreement when the server returns no tokens."""
    return _PIECE.findall(text)


def agreement(answers: Mapping[str, Sequence[str]], reference: Mapping[str, Sequence[str]]) -> float | None:
    """The share of identical leading tokens of two runs on the same prompts: per prompt the common prefix over
    the longer answer, averaged over the prompts both answered. None when they share no answered prompt."""
    shares: list[float] = []
    for key, mine in answers.items():
        theirs = reference.get(key)
        if theirs is None:
            continue
        longest = max(len(mine), len(theirs))
        if longest == 0:
            shares.append(1.0)
            continue
        same = 0
        for a, b in zip(mine, theirs, strict=False):
            if a != b:
                break
            same += 1
        shares.append(same / longest)
    return round(sum(shares) / len(shares), 4) if shares else None


def _root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


def _body(endpoint: Endpoint, task: QualityTask, api: str, max_tokens: int, logprobs: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": endpoint.served_model, "max_tokens": max_tokens, "temperature": 0.0}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": task.prompt}]
        if logprobs:
            body["logprobs"] = True  # vLLM names each generated token; most others ignore it
    else:
        body["prompt"] = f"Question: {task.prompt}\nAnswer:"
        if logprobs:
            body["logprobs"] = 0
    return body


def _answer_of(data: Any, api: str) -> tuple[str, list[str] | None]:
    """The text of a (non-streamed) answer and the server's tokens of it when it lists them."""
    choice = (data.get("choices") or [{}])[0] if isinstance(data, dict) else {}
    if api == "chat":
        text = str(((choice.get("message") or {}).get("content")) or "")
        content = (choice.get("logprobs") or {}).get("content")
        tokens = [str(t.get("token", "")) for t in content] if isinstance(content, list) else None
    else:
        text = str(choice.get("text") or "")
        listed = (choice.get("logprobs") or {}).get("tokens")
        tokens = [str(t) for t in listed] if isinstance(listed, list) else None
    return text, tokens


async def _ask(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], api: str
) -> tuple[str, list[str] | None, str | None]:
    try:
        resp = await client.post(url, json=body)
        if resp.status_code != 200:
            return "", None, f"HTTP {resp.status_code}: {resp.text[:200]}"
        text, tokens = _answer_of(resp.json(), api)
        return text, tokens, None
    except (httpx.HTTPError, ValueError) as exc:
        return "", None, f"{type(exc).__name__}: {exc}"


async def _ask_all(
    endpoint: Endpoint,
    bodies: list[dict[str, Any]],
    api: str,
    concurrency: int,
    timeout: float,
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[tuple[str, list[str] | None, str | None]]:
    headers = endpoint.request_headers()
    url = _root(endpoint.base_url) + ("/v1/chat/completions" if api == "chat" else "/v1/completions")
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=timeout, headers=headers, transport=transport) as client:

        async def one(body: dict[str, Any]) -> tuple[str, list[str] | None, str | None]:
            async with gate:
                return await _ask(client, url, body, api)

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def tally(
    tasks: Sequence[QualityTask], answers: Sequence[str], errors: Sequence[str | None]
) -> dict[str, Any]:
    """The scored result of answered tasks: totals, accuracy and its 95% interval, each kind's tally, each task."""
    items: list[dict[str, Any]] = []
    by_task: dict[str, dict[str, Any]] = {}
    for task, text, error in zip(tasks, answers, errors, strict=True):
        ok = error is None and score(task, text)
        item: dict[str, Any] = {"id": task.id, "kind": task.kind, "correct": ok, "expected": task.expected}
        item["answer"] = text[:200]
        if error is not None:
            item["error"] = error
        items.append(item)
        kind = by_task.setdefault(task.kind, {"tasks": 0, "correct": 0})
        kind["tasks"] += 1
        kind["correct"] += int(ok)
    for kind in by_task.values():
        kind["accuracy"] = round(kind["correct"] / kind["tasks"], 4)
    return scored(len(items), sum(int(i["correct"]) for i in items)) | {"by_task": by_task, "items": items}


def scored(total: int, correct: int) -> dict[str, Any]:
    """``tasks``, ``correct``, ``accuracy`` and ``accuracy_ci95`` (Wilson), rounded for storage."""
    lo, hi = wilson(correct, total)
    return {
        "tasks": total,
        "correct": correct,
        "accuracy": round(correct / total, 4) if total else None,
        "accuracy_ci95": [round(lo, 4), round(hi, 4)],
    }


def run_probe(
    endpoint: Endpoint,
    *,
    seed: int = 0,
    count: int = DEFAULT_TASKS,
    api: str = "chat",
    max_tokens: int = MAX_TOKENS,
    concurrency: int = CONCURRENCY,
    timeout: float = TIMEOUT_S,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Ask ``endpoint`` the seeded task set at temperature 0 and score it; the run's ``quality`` JSON (with
    ``agreement`` None: a reference is the caller's to find, ``agreement`` states it). ``transport`` replaces
    the network (tests)."""
    tasks = make_tasks(seed, count)
    t0 = time.monotonic()
    replies = []
    for logprobs in (True, False):  # a server that refuses the logprobs field is asked again without it
        bodies = [_body(endpoint, t, api, max_tokens, logprobs) for t in tasks]
        replies = asyncio.run(_ask_all(endpoint, bodies, api, concurrency, timeout, transport))
        if not all((r[2] or "").startswith("HTTP 4") for r in replies):
            break
    wall = time.monotonic() - t0
    texts = [r[0] for r in replies]
    errors = [r[2] for r in replies]
    server_tokens = all(r[1] is not None for r in replies if r[2] is None) and any(
        r[2] is None for r in replies
    )
    answers = {
        t.id: (r[1] if server_tokens and r[1] is not None else pieces(r[0]))
        for t, r in zip(tasks, replies, strict=True)
        if r[2] is None
    }
    out = tally(tasks, texts, errors)
    failed = sum(1 for e in errors if e is not None)
    out.update(
        source="probe",
        probe_version=PROBE_VERSION,
        seed=seed,
        api=api,
        temperature=0.0,
        max_tokens=max_tokens,
        failed=failed,
        wall_s=round(wall, 2),
        agreement=None,
        agreement_unit="tokens" if server_tokens else "words",
        reference_run=None,
        answers=answers,
    )
    if failed == len(tasks):
        out["error"] = f"every probe request failed; first: {errors[0]}"
    return out


def same_prompts(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two stored probe results asked the same prompts the same way (and can be set side by side)."""
    keys = ("source", "probe_version", "seed", "tasks", "api", "max_tokens", "agreement_unit")
    return all(a.get(k) == b.get(k) for k in keys) and bool(a.get("answers")) and bool(b.get("answers"))
