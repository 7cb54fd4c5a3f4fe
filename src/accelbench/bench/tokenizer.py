"""Tokenizers for the benchmark: a local tokenizer directory, or the server's own ``/tokenize`` + ``/detokenize``.

The benchmark needs a tokenizer for two things: building random prompts with an exact token count, and counting
output tokens when the server sends no usage. What matters is the count *the server* makes, so every tokenizer
answers ``prompt_token_ids(text, endpoint)``: for the completions endpoint the prompt encoded with the special
tokens the server adds (BOS, ...); for the chat endpoint the prompt wrapped as one user message in the model's
chat template (``add_generation_prompt``), encoded without extra special tokens, as vLLM does.

A local directory is read with the ``tokenizers`` library (``tokenizer.json``) and ``jinja2`` for the chat template
(``tokenizer_config.json`` or ``chat_template.jinja``/``.json``), rendered the way transformers renders it; no
transformers import, so loading is quick and the object is cheap to reuse across a sweep. A directory with only a
slow (SentencePiece) tokenizer is loaded through transformers when it is installed.
"""

from __future__ import annotations

import json
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import jinja2
import jinja2.ext
import jinja2.sandbox
from tokenizers import Tokenizer as FastTokenizer

from accelbench.domain.answers import DetokenizeAnswer, MalformedAnswer, TokenizeAnswer, parse_answer
from accelbench.domain.endpoint import Endpoint
from accelbench.domain.load import EndpointKind
from accelbench.errors import ServerUnreachable, UserInputError
from accelbench.redact import redact_text, redact_url

#: Text of a special token (``<|im_start|>``, ``<s>``, ``</s>``).
_MARKER = re.compile(r"^<[^<>\s]+>$")


#: Stands in for the user's text when the chat template is rendered once and reused (see ``LocalTokenizer``).
_PLACEHOLDER = "\x00ACCELBENCH_PROMPT\x00"


class Tokenizer(ABC):
    """What the benchmark needs of a tokenizer. Implementations must be safe to use from several threads."""

    #: A short description (directory or URL) stored with results as ``tokenizer_id``.
    name: str

    @abstractmethod
    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]: ...

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str: ...

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = False) -> list[list[int]]:
        return [self.encode(t, add_special_tokens=add_special_tokens) for t in texts]

    def decode_batch(self, batch: Sequence[Sequence[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]

    @abstractmethod
    def prompt_token_ids(self, text: str, endpoint: EndpointKind) -> list[int]:
        """The token ids the server builds from ``text`` sent to ``endpoint`` (template and specials included)."""

    def prompt_token_ids_batch(self, texts: Sequence[str], endpoint: EndpointKind) -> list[list[int]]:
        return [self.prompt_token_ids(t, endpoint) for t in texts]

    def count_prompt(self, text: str, endpoint: EndpointKind) -> int:
        return len(self.prompt_token_ids(text, endpoint))

    def count_output(self, texts: Sequence[str]) -> list[int]:
        """Tokens in generated texts (no special tokens added), for servers that send no usage."""
        return [len(ids) for ids in self.encode_batch(list(texts), add_special_tokens=False)]

    @property
    @abstractmethod
    def special_ids(self) -> set[int]:
        """Ids never to put in a random prompt (BOS, EOS, chat markers, ...)."""

    def recipe(self) -> tuple[str, Any] | None:
        """What another process needs to load the same tokenizer (``tokenizer_from_recipe``); None when it
        cannot (a tokenizer made in code)."""
        return None


def _token_content(value: Any) -> str | None:
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def _raise_exception(message: str) -> None:
    raise UserInputError(f"The chat template refused the prompt: {message}")


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class ChatTemplate:
    """A Hugging Face chat template rendered like transformers does (sandboxed jinja2, trim/lstrip blocks)."""

    def __init__(self, source: str, special: dict[str, str | None]) -> None:
        def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
                   sort_keys: bool = False) -> str:  # fmt: skip
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                              sort_keys=sort_keys)  # fmt: skip

        env = jinja2.sandbox.ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
        )
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        self._template = env.from_string(source)
        self._special = {k: v for k, v in special.items() if v is not None}
        self._lock = threading.Lock()

    def render(self, messages: list[dict[str, Any]]) -> str:
        with self._lock:  # jinja2 templates are thread-safe, but keep renders cheap and ordered
            return self._template.render(messages=messages, add_generation_prompt=True, **self._special)


class LocalTokenizer(Tokenizer):
    """A tokenizer directory (``tokenizer.json`` + ``tokenizer_config.json``), read with ``tokenizers``."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).expanduser()
        self.name = str(self.directory)
        if not self.directory.is_dir():
            raise UserInputError(
                f"Tokenizer directory {self.directory} does not exist.",
                hint="Give a directory with tokenizer.json (a model directory works), or leave --tokenizer "
                "out to use the server's /tokenize.",
            )
        cfg_path = self.directory / "tokenizer_config.json"
        self.config: dict[str, Any] = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        self._tok: Any = None
        self._hf: Any = None
        tj = self.directory / "tokenizer.json"
        if tj.exists():
            self._tok = FastTokenizer.from_file(str(tj))
        else:
            try:
                # heavy (torch-sized): only for a model without tokenizer.json
                from transformers import AutoTokenizer
            except ImportError:
                raise UserInputError(
                    f"{self.directory} has no tokenizer.json, and transformers (needed for other tokenizer "
                    "formats) is not installed.",
                    hint="Install transformers, or leave --tokenizer out to use the server's /tokenize.",
                ) from None
            self._hf = AutoTokenizer.from_pretrained(str(self.directory))
        special = {
            key: _token_content(self.config.get(key))
            for key in ("bos_token", "eos_token", "unk_token", "pad_token")
        }
        self.template: ChatTemplate | None = None
        source = self._chat_template_source()
        if source:
            self.template = ChatTemplate(source, special)
        self._wrap: tuple[str, str] | None = None
        self._wrap_checked = False
        self._special_ids: set[int] | None = None

    def _chat_template_source(self) -> str | None:
        jinja = self.directory / "chat_template.jinja"
        if jinja.exists():
            return jinja.read_text()
        js = self.directory / "chat_template.json"
        if js.exists():
            data = json.loads(js.read_text())
            return data.get("chat_template") if isinstance(data, dict) else None
        tmpl = self.config.get("chat_template")
        if isinstance(tmpl, list):  # named templates: use "default"
            named = {t.get("name"): t.get("template") for t in tmpl if isinstance(t, dict)}
            tmpl = named.get("default") or next(iter(named.values()), None)
        if tmpl is None and self._hf is not None:
            tmpl = getattr(self._hf, "chat_template", None)
        return tmpl if isinstance(tmpl, str) else None

    # --------------------------------------------------------------------------- encode/decode
    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        if self._tok is not None:
            return list(self._tok.encode(text, add_special_tokens=add_special_tokens).ids)
        return list(self._hf.encode(text, add_special_tokens=add_special_tokens))

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = False) -> list[list[int]]:
        if self._tok is not None:
            encs = self._tok.encode_batch(list(texts), add_special_tokens=add_special_tokens)
            return [list(e.ids) for e in encs]
        return super().encode_batch(texts, add_special_tokens=add_special_tokens)

    def decode(self, ids: Sequence[int]) -> str:
        if self._tok is not None:
            return str(self._tok.decode(list(ids), skip_special_tokens=False))
        return str(self._hf.decode(list(ids), skip_special_tokens=False))

    def decode_batch(self, batch: Sequence[Sequence[int]]) -> list[str]:
        if self._tok is not None:
            return [
                str(s) for s in self._tok.decode_batch([list(b) for b in batch], skip_special_tokens=False)
            ]
        return super().decode_batch(batch)

    @property
    def special_ids(self) -> set[int]:
        if self._special_ids is None:
            ids: set[int] = set()
            if self._tok is not None:
                for tid, added in self._tok.get_added_tokens_decoder().items():
                    ids.add(int(tid))
                    del added
            for tid, info in (self.config.get("added_tokens_decoder") or {}).items():
                if isinstance(info, dict) and info.get("special", True):
                    ids.add(int(tid))
            if self._hf is not None:
                ids.update(int(i) for i in getattr(self._hf, "all_special_ids", []))
            self._special_ids = ids
        return self._special_ids

    def recipe(self) -> tuple[str, Any] | None:
        return ("directory", str(self.directory))

    # --------------------------------------------------------------------------- the server's count
    def render_chat(self, text: str) -> str:
        if self.template is None:
            raise UserInputError(
                f"The tokenizer in {self.directory} has no chat template, so accelbench cannot know how many "
                "tokens the chat endpoint will see.",
                hint="Use --endpoint completions, or a tokenizer directory whose tokenizer_config.json has a "
                "chat_template.",
            )
        wrap = self._chat_wrap()
        if wrap is not None:
            return wrap[0] + text + wrap[1]
        return self.template.render([{"role": "user", "content": text}])

    def _chat_wrap(self) -> tuple[str, str] | None:
        """The template rendered once around a placeholder, when it inserts the message verbatim (most do);
        None when it transforms the content (e.g. trims it), and then every prompt is rendered in full."""
        if not self._wrap_checked:
            self._wrap_checked = True
            assert self.template is not None
            rendered = self.template.render([{"role": "user", "content": _PLACEHOLDER}])
            if rendered.count(_PLACEHOLDER) == 1:
                before, after = rendered.split(_PLACEHOLDER)
                probe = "  Probe text,\nwith spaces  "
                if self.template.render([{"role": "user", "content": probe}]) == before + probe + after:
                    self._wrap = (before, after)
        return self._wrap

    def prompt_token_ids(self, text: str, endpoint: EndpointKind) -> list[int]:
        if endpoint == EndpointKind.chat:
            return self.encode(self.render_chat(text), add_special_tokens=False)
        return self.encode(text, add_special_tokens=True)

    def prompt_token_ids_batch(self, texts: Sequence[str], endpoint: EndpointKind) -> list[list[int]]:
        if endpoint == EndpointKind.chat:
            return self.encode_batch([self.render_chat(t) for t in texts], add_special_tokens=False)
        return self.encode_batch(texts, add_special_tokens=True)


class ServerTokenizer(Tokenizer):
    """The server's ``/tokenize`` and ``/detokenize`` (vLLM's API), for when no tokenizer directory is given.

    The chat count asks ``/tokenize`` with ``messages``, so the server applies its own chat template: the count is
    exactly the one the server will make."""

    def __init__(self, endpoint: Endpoint, *, timeout_s: float = 60.0, workers: int = 8) -> None:
        self.endpoint = endpoint
        self.base = endpoint.base_url.rstrip("/")
        self.model = endpoint.served_model
        self.shown = redact_url(self.base)  # what messages and ids name: never the URL's password
        self.name = f"{self.shown}/tokenize"
        self._client = httpx.Client(timeout=timeout_s, headers=endpoint.request_headers())
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tokenize")
        self._special: set[int] | None = None

    def recipe(self) -> tuple[str, Any] | None:
        return ("server", self.endpoint)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._client.close()

    def _post(self, path: str, body: dict[str, Any]) -> bytes:
        try:
            r = self._client.post(self.base + path, json=body)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServerUnreachable.at(self.shown, exc) from None
        except httpx.HTTPError as exc:
            raise UserInputError(
                f"{self.shown}{path} failed: {redact_text(str(exc)) or type(exc).__name__}"
            ) from None
        if r.status_code != 200:
            raise UserInputError(
                f"{self.shown}{path} answered HTTP {r.status_code}: {r.text[:200]}",
                hint="Give a local tokenizer directory with --tokenizer.",
            )
        return r.content

    def _tokens(self, body: dict[str, Any]) -> list[int]:
        return parse_answer(TokenizeAnswer, self._post("/tokenize", body), self.base + "/tokenize").tokens

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        return self._tokens({"model": self.model, "prompt": text, "add_special_tokens": add_special_tokens})

    def decode(self, ids: Sequence[int]) -> str:
        body = self._post("/detokenize", {"model": self.model, "tokens": [int(i) for i in ids]})
        return parse_answer(DetokenizeAnswer, body, self.base + "/detokenize").prompt

    def encode_batch(self, texts: Sequence[str], *, add_special_tokens: bool = False) -> list[list[int]]:
        return list(self._pool.map(lambda t: self.encode(t, add_special_tokens=add_special_tokens), texts))

    def decode_batch(self, batch: Sequence[Sequence[int]]) -> list[str]:
        return list(self._pool.map(self.decode, batch))

    def prompt_token_ids(self, text: str, endpoint: EndpointKind) -> list[int]:
        if endpoint == EndpointKind.chat:
            body = {
                "model": self.model,
                "messages": [{"role": "user", "content": text}],
                "add_generation_prompt": True,
                "add_special_tokens": False,
            }
            return self._tokens(body)
        return self.encode(text, add_special_tokens=True)

    def prompt_token_ids_batch(self, texts: Sequence[str], endpoint: EndpointKind) -> list[list[int]]:
        return list(self._pool.map(lambda t: self.prompt_token_ids(t, endpoint), texts))

    @property
    def special_ids(self) -> set[int]:
        """The special tokens the server's chat template wraps a message in (``<|im_start|>``, ``<s>``, ...):
        the ids of an empty chat prompt whose text looks like a marker. The server has no API listing them."""
        if self._special is None:
            try:
                ids = sorted(set(self.prompt_token_ids("", EndpointKind.chat)))
            except UserInputError:
                ids = []
            texts = self.decode_batch([[i] for i in ids]) if ids else []
            self._special = {i for i, t in zip(ids, texts, strict=True) if _MARKER.match(t.strip())}
        return self._special


def tokenizer_from_recipe(recipe: tuple[str, Any]) -> Tokenizer:
    """The tokenizer ``Tokenizer.recipe`` describes, loaded in this process."""
    kind, value = recipe
    if kind == "directory":
        return LocalTokenizer(value)
    return ServerTokenizer(value)


def load_tokenizer(endpoint: Endpoint, source: str | Path | None = None) -> Tokenizer:
    """The tokenizer for a benchmark: ``source`` (or ``endpoint.tokenizer``) as a local directory, else the
    server's ``/tokenize``. Load it once and pass it to every ``run_benchmark`` call of a sweep."""
    src = source if source is not None else endpoint.tokenizer
    if src:
        return LocalTokenizer(src)
    tok = ServerTokenizer(endpoint)
    try:
        probe = tok.encode("hello world", add_special_tokens=False)
        if not probe:  # e.g. llama.cpp's /tokenize, which wants {"content": ...}, answers with no tokens
            raise UserInputError("its /tokenize returned no tokens for 'hello world' (not vLLM's API)")
    except ServerUnreachable:
        tok.close()
        raise
    except UserInputError as exc:
        tok.close()
        error = MalformedAnswer if isinstance(exc, MalformedAnswer) else UserInputError  # keeps its exit code
        raise error(
            f"No tokenizer: none was given and the server's /tokenize does not work ({exc.message}).",
            hint="Give the model's tokenizer directory with --tokenizer DIR.",
        ) from None
    return tok
