"""A small named registry used for runtimes, datasets, schedules, targets, telemetry sources and report
sections.

``@REG.register("name")`` adds an entry, ``REG.get("name")`` returns it, and an unknown name raises an error
that suggests the closest known names. ``REG.add_module("pkg.mod")`` lists a module whose import registers
entries: an extension is that one module plus that one registration.
"""

from __future__ import annotations

import difflib
import importlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from accelbench.errors import NotFoundError

T = TypeVar("T")


def close_matches(name: str, choices: Iterable[str]) -> list[str]:
    """The (at most three, distinct) known names closest to ``name``: by spelling, else by containment."""
    known = sorted(set(choices))
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    if not close:
        lowered = name.lower()
        close = [c for c in known if lowered and (lowered in c.lower() or c.lower() in lowered)][:3]
    return close


def suggestion(name: str, choices: Iterable[str]) -> str:
    """The sentence " Did you mean 'a' or 'b'?" for the closest names; empty when none is close."""
    close = close_matches(name, choices)
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?" if close else ""


def did_you_mean(name: str, choices: Iterable[str], what: str) -> NotFoundError:
    """Build the error for an unknown name, with the closest matches and the full list when short."""
    choices = sorted(set(choices))
    msg = f"Unknown {what} {name!r}." + suggestion(name, choices)
    hint = "Known: " + ", ".join(choices) if len(choices) <= 30 else None
    return NotFoundError(msg, hint=hint)


class Registry(Generic[T]):
    """Named entries. ``modules`` are imported on the first lookup: entries register themselves when their
    module is imported, and a lookup must see them all without every caller importing each module.

    The first lookups may come from many threads at once (the API's request threads after a start): one
    thread imports, the others wait for it, so none sees a half-filled registry. A module that looks the
    registry up while it is being imported (the same thread) sees what is registered so far."""

    def __init__(self, what: str, modules: list[str] | None = None) -> None:
        self.what = what
        self._items: dict[str, T] = {}
        self._modules = list(modules or [])
        self._loaded = not self._modules
        self._loading = False
        self._lock = threading.RLock()

    def _load(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded or self._loading:  # loaded meanwhile, or this thread is importing the modules
                return
            self._loading = True
            try:
                for module in self._modules:
                    importlib.import_module(module)
                self._loaded = True
            finally:
                self._loading = False

    def add_module(self, module: str) -> None:
        """List one more module whose import registers entries (a runtime, a dataset, a schedule... of your
        own, in any importable package): the next lookup imports it, even after the first lookups."""
        with self._lock:
            if module not in self._modules:
                self._modules.append(module)
                self._loaded = False

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.what} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return deco

    def add(self, name: str, obj: T) -> None:
        self.register(name)(obj)

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._items[name]
        except KeyError:
            raise did_you_mean(name, list(self._items), self.what) from None

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        self._load()
        return iter(sorted(self._items))

    def items(self) -> list[tuple[str, T]]:
        self._load()
        return sorted(self._items.items())
