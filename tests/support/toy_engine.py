"""A toy engine *server* for the local target's process-handling tests (never what the product runs).

It behaves like an engine as far as process handling goes: prints a start-up log, serves /health,
/v1/models and a non-streaming /v1/chat/completions, and can be told to

- ``--children N``: start N child processes that sleep (like vLLM's engine-core workers);
- ``--escape``: start one more grandchild that leaves the process group (setsid);
- ``--ignore-term``: ignore SIGTERM (teardown must escalate to SIGKILL);
- ``--fail-with TEXT``: print TEXT and exit 1 during start-up (a known failure line);
- ``--fail-unless-file PATH``: like --fail-with, unless PATH exists (a fix then a restart succeeds);
- ``--startup-s S``: take S seconds before listening; ``--die-after S``: exit 3 S seconds after ready;
- ``--answer TEXT``: what the chat endpoint answers;
- ``--sigill-at start|request``: execute an illegal instruction (``ud2``) at start-up or on the first chat
  request: the process dies of a real SIGILL, as an engine built for the wrong instruction set does;
- ``--isa-kernel start|request``: run the kernel of the toy compiled package (``toy_isa_pkg``, installed in the
  engine's environment) at start-up or on each chat request; built with AMX, it dies of SIGILL there. The
  package's build report is printed at start-up in llama.cpp's ``system_info`` layout.
- ``--segv-amx-build``: print a ``system_info`` line of a build with AMX at start-up and die of a real SIGSEGV on
  the first chat request (where a kernel line of a general protection fault says whether it was AMX's).

Each child writes its pid to ``--pid-dir`` so the tests can check that every one of them is gone.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def _sleeper(pid_dir: str | None, escape: bool) -> subprocess.Popen[bytes]:
    code = (
        "import os, sys, time\n"
        "d = sys.argv[1]\n"
        "if d != '-':\n"
        "    open(os.path.join(d, f'{os.getpid()}.pid'), 'w').close()\n"
        "time.sleep(3600)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, pid_dir or "-"],
        start_new_session=escape,  # an escaping child leaves the process group
    )


def _illegal_instruction() -> None:
    """Run ``ud2`` (x86's defined illegal instruction) from executable memory: a real SIGILL."""
    import ctypes
    import mmap

    print("toy engine: running an illegal instruction", flush=True)
    buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(b"\x0f\x0b\xc3")  # ud2; ret
    ctypes.CFUNCTYPE(None)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))()


def _segfault() -> None:
    """Read address 0: a real, synchronous SIGSEGV in this thread. (``os.kill(os.getpid(), SIGSEGV)`` is not one:
    the kernel delivers a core-dumping signal sent to the process to one thread of its choosing, often the main
    one, and the handler thread could answer 200 before the process died.)"""
    import ctypes

    ctypes.string_at(0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--served-model-name", required=True)
    ap.add_argument("--model", default="")
    ap.add_argument("--children", type=int, default=0)
    ap.add_argument("--escape", action="store_true")
    ap.add_argument("--ignore-term", action="store_true")
    ap.add_argument("--fail-with", default=None)
    ap.add_argument("--fail-unless-file", default=None)
    ap.add_argument("--startup-s", type=float, default=0.0)
    ap.add_argument("--die-after", type=float, default=None)
    ap.add_argument("--answer", default="Red, blue and green are three colors.")
    ap.add_argument("--pid-dir", default=None)
    ap.add_argument("--isa-kernel", choices=("start", "request"), default=None)
    ap.add_argument("--sigill-at", choices=("start", "request"), default=None)
    ap.add_argument("--segv-amx-build", action="store_true")
    args = ap.parse_args()
    if args.segv_amx_build:
        print("CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |", flush=True)
    if args.sigill_at == "start":
        _illegal_instruction()
    kernel = None
    if args.isa_kernel:
        import toy_isa  # the toy compiled package, in the engine's environment

        print(toy_isa.system_info(), flush=True)
        kernel = toy_isa.matmul
        if args.isa_kernel == "start":
            kernel()

    print(f"toy engine starting: model={args.model} served={args.served_model_name}", flush=True)
    print(f"env TOY_SETTING={os.environ.get('TOY_SETTING', '')}", flush=True)
    if args.pid_dir:
        Path(args.pid_dir, f"{os.getpid()}.pid").touch()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kids = [_sleeper(args.pid_dir, False) for _ in range(args.children)]
    if args.escape:
        kids.append(_sleeper(args.pid_dir, True))
    for i in range(3):
        print(f"loading weights {i + 1}/3", flush=True)
    if args.fail_with and not (args.fail_unless_file and Path(args.fail_unless_file).exists()):
        print("Traceback (most recent call last):", flush=True)
        print(args.fail_with, flush=True)
        return 1
    time.sleep(args.startup_s)

    served = args.served_model_name

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *a: object) -> None:
            print("http " + format % a, flush=True)

        def _json(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._json(200, {})
            elif self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": served, "object": "model"}]})
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(n) or b"{}")
            if self.path != "/v1/chat/completions" or body.get("model") != served:
                self._json(404, {"error": f"unknown model {body.get('model')!r}"})
                return
            if kernel is not None:
                kernel()
            if args.sigill_at == "request":
                _illegal_instruction()
            if args.segv_amx_build:
                print("toy engine: segmentation fault", flush=True)
                _segfault()
            msg = {"role": "assistant", "content": args.answer}
            self._json(200, {"choices": [{"index": 0, "message": msg, "finish_reason": "stop"}]})

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"listening on {args.host}:{args.port}", flush=True)
    if args.die_after is not None:

        def die() -> None:
            time.sleep(args.die_after)
            print("toy engine: fatal error, exiting", flush=True)
            os._exit(3)

        threading.Thread(target=die, daemon=True).start()
    try:
        server.serve_forever()
    finally:
        for k in kids:
            k.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
