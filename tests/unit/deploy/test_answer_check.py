"""The answer check passes real answers and fails what a broken conversion produces (random tokens)."""

from __future__ import annotations

import random

import pytest

from accelbench.deploy.answer_check import judge_answer


@pytest.mark.parametrize(
    "answer",
    [
        "1. Red\n2. Blue\n3. Green",
        "Sure! Here are three colors: red, blue, and yellow.",
        "Three colours are purple, orange and white.",
    ],
)
def test_real_answers_pass(answer: str) -> None:
    check = judge_answer(answer)
    assert check.passed, check.reason
    assert len(check.colours) >= 2


# Pieces of the kind a byte-pair vocabulary holds; a model with scrambled embeddings strings them together.
SUBWORDS = [
    "ology",
    "iddle",
    "Visual",
    "angs",
    "ĠPers",
    "umbn",
    "atics",
    "ynt",
    "Ġsubst",
    "ilib",
    "rog",
    "ensional",
    "ĠQuint",
    "acci",
    "unct",
    "heid",
    "Ġvar",
    "ouched",
    "ÃĤ",
    "izz",
    "ighth",
    "uclear",
    "ĠEph",
    "aryn",
    "ĠPhill",
    "abal",
    "istrates",
    "ogg",
    "Ġmerc",
    "olith",
    "ÂŃ",
    "Ġcong",
    "ranch",
    "opsis",
    "Ġunm",
    "uxt",
]


def garbage(seed: int, n: int = 30) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(SUBWORDS) for _ in range(n)).replace("Ġ", " ")


@pytest.mark.parametrize("seed", range(20))
def test_random_tokens_fail(seed: int) -> None:
    check = judge_answer(garbage(seed))
    assert not check.passed
    assert check.reason


def test_english_that_does_not_answer_fails() -> None:
    check = judge_answer("I am not sure what you mean by that question, could you say more?")
    assert not check.passed and "colour" in check.reason


def test_empty_and_numbers_fail() -> None:
    assert not judge_answer("").passed
    assert not judge_answer("1. 2. 3. 4.").passed
    assert "word" in judge_answer("red").reason


def test_colour_names_in_noise_do_not_pass() -> None:
    noisy = garbage(1) + " red " + garbage(2) + " blue " + garbage(3)
    check = judge_answer(noisy)
    assert not check.passed and "English words" in check.reason
