"""The one redaction rule, used for API responses, the store, run files, recorded commands and logs. There
were two rules (and two more ad hoc ones) that disagreed: `bench -H "X-Custom-Auth: ..."` was stored in clear
in the run's command, `--api-key ...` in extra_args was served unmasked, URL credentials were served and
logged."""

from __future__ import annotations

import logging

import pytest

from accelbench.redact import RedactingFilter, is_secret_name, redact, redact_argv, redact_url


@pytest.mark.parametrize(
    "name", ["HF_TOKEN", "hf_token", "X-Custom-Auth", "Authorization", "OPENAI_API_KEY", "--api-key",
             "AWS_SECRET_ACCESS_KEY", "db_password", "x-api-key", "access_token", "Cookie"],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name", ["max_num_batched_tokens", "TOKENIZERS_PARALLELISM", "kv_cache_dtype", "VLLM_CPU_KVCACHE_SPACE",
             "output_tokens", "author", "--max-model-len", "keyboard"],
)  # fmt: skip
def test_names_that_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)


def test_arguments_headers_urls_and_nested_values() -> None:
    argv = ["bench", "--api-key", "k1", "--token=k2", "-H", "X-Custom-Auth: k3", "--header=X-Team: perf",
            "--base-url", "http://u:k4@h:8000", "--max-num-batched-tokens", "8"]  # fmt: skip
    assert redact_argv(argv) == ["bench", "--api-key", "***", "--token=***", "-H", "X-Custom-Auth:***",
                                 "--header=X-Team: perf", "--base-url", "http://u:***@h:8000",
                                 "--max-num-batched-tokens", "8"]  # fmt: skip
    assert redact_url("/runs?token=k5&limit=2") == "/runs?token=***&limit=2"
    doc = {"engine": {"settings": {"extra_args": ["--api-key", "k6"], "env": {"HF_TOKEN": "k7", "OMP": "1"}}},
           "endpoint": {"base_url": "https://a:k8@x", "headers": {"X-Auth": "k9"}}, "n": 3}  # fmt: skip
    text = str(redact(doc))
    assert not any(f"k{i}" in text for i in range(6, 10)) and "'OMP': '1'" in text and "'n': 3" in text


def test_log_records_are_masked() -> None:
    record = logging.LogRecord("httpx", logging.INFO, "", 0, 'HTTP Request: %s %s "%s"', (
        "POST", "http://user:k10@engine:8000/v1/completions?api_key=k11", "HTTP/1.1 200 OK"), None)  # fmt: skip
    RedactingFilter().filter(record)
    assert "k10" not in record.getMessage() and "k11" not in record.getMessage()
