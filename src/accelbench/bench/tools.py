"""Tool definitions a chat benchmark sends with every request (``LoadSettings.tools``).

``"builtin"`` is two small OpenAI function tools (``get_weather`` and ``search``); anything else is the path of a
JSON file holding a list of OpenAI tool objects (``{"type": "function", "function": {"name": ..., ...}}``). A
file is read and checked once per benchmark, when its dataset is opened (``open_dataset``); ``cached_tools``
serves callers that only have the config (``request_body`` without its ``tools`` argument).
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

from accelbench.errors import UserInputError

#: The value of ``tools`` that means the two built-in tools below.
BUILTIN = "builtin"

BUILTIN_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city, e.g. Paris."},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web and return the best results.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for."},
                    "top_k": {"type": "integer", "minimum": 1, "maximum": 10},
                },
                "required": ["query"],
            },
        },
    },
]

_HINT = (
    'Give --tools builtin, or a JSON file holding a list of {"type": "function", "function": {"name": ..., '
    '"parameters": {...}}} objects.'
)


def validate_tools(data: Any, where: str) -> list[dict[str, Any]]:
    """``data`` checked as a list of OpenAI function tools; ``where`` names it in the error."""
    if not isinstance(data, list) or not data:
        raise UserInputError(f"{where} must hold a non-empty JSON list of tools.", hint=_HINT)
    names: set[str] = set()
    for i, tool in enumerate(data):
        if not isinstance(tool, dict):
            raise UserInputError(f"{where}: tool {i} is not an object.", hint=_HINT)
        if tool.get("type") != "function":
            raise UserInputError(
                f'{where}: tool {i} has type {tool.get("type")!r}; only "function" tools are sent.',
                hint=_HINT,
            )
        fn = tool.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"].strip():
            raise UserInputError(f"{where}: tool {i} has no function.name string.", hint=_HINT)
        if "parameters" in fn and not isinstance(fn["parameters"], dict):
            raise UserInputError(
                f"{where}: tool {i} ({fn['name']}) has parameters that are not an object.", hint=_HINT
            )
        if fn["name"] in names:
            raise UserInputError(f"{where}: tool name {fn['name']!r} appears twice.", hint=_HINT)
        names.add(fn["name"])
    return data


def load_tools(spec: str) -> list[dict[str, Any]]:
    """The tools ``spec`` means: the built-in ones, or the checked list of a JSON file (read now)."""
    if spec.strip() == BUILTIN:
        return copy.deepcopy(BUILTIN_TOOLS)
    path = Path(spec.strip()).expanduser()
    if not path.is_file():
        raise UserInputError(f"Tools file {path} does not exist.", hint=_HINT)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"Tools file {path} cannot be read: {exc}.", hint=_HINT) from None
    except json.JSONDecodeError as exc:
        raise UserInputError(
            f"Tools file {path} is not JSON: {exc.msg} (line {exc.lineno}).", hint=_HINT
        ) from None
    return validate_tools(data, f"Tools file {path}")


@functools.lru_cache(maxsize=16)
def cached_tools(spec: str) -> tuple[dict[str, Any], ...]:
    """``load_tools`` once per spec in this process (for callers without the opened dataset's tools)."""
    return tuple(load_tools(spec))


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [str(t["function"]["name"]) for t in tools]


__all__ = ["BUILTIN", "BUILTIN_TOOLS", "cached_tools", "load_tools", "tool_names", "validate_tools"]
