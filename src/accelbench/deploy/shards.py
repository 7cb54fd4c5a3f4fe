"""How the in-cluster load generator's shards work together and how their results leave the pods.

Shard arithmetic: a cell's concurrency and prompts split as evenly as whole numbers allow, the request rate in
proportion, a prompt seed per shard. The barrier: shard 0 serves ``GET /barrier/<step>?shard=<i>`` and answers
every shard with one common start instant once all have arrived. The framing: results leave a pod through its
log as gzip-compressed JSON in base64, in framed lines with a SHA-256, so a truncated log is detected rather than
half-read.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import math
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from accelbench.domain.load import BenchConfig
from accelbench.errors import EngineError

BEGIN = "ACCELBENCH-RESULT-BEGIN"
PART = "ACCELBENCH-RESULT-PART"
END = "ACCELBENCH-RESULT-END"
CHUNK = 3000  # characters of base64 per log line: far below any log line limit


# ----------------------------------------------------------------------------------- shard arithmetic
def share(total: int, shards: int, index: int) -> int:
    """Shard ``index``'s whole share of ``total`` (the first ``total % shards`` shards get one more)."""
    return total // shards + (1 if index < total % shards else 0)


def shard_config(config: BenchConfig, concurrency: int, shards: int, index: int) -> BenchConfig | None:
    """The part of one cell's ``config`` that shard ``index`` sends; None when its share is empty."""
    c = share(concurrency, shards, index)
    if c == 0:
        return None
    per_concurrency = config.num_prompts // max(1, concurrency)
    rate = config.request_rate if math.isinf(config.request_rate) else config.request_rate * c / concurrency
    seed = int.from_bytes(hashlib.sha256(f"{config.seed}:{index}".encode()).digest()[:4], "big")
    return config.model_copy(
        update={
            "max_concurrency": c,
            "num_prompts": max(1, per_concurrency * c),
            "request_rate": rate,
            "seed": seed if shards > 1 else config.seed,
            # one scraper is enough: every shard would read the same server's /metrics
            "scrape_metrics": config.scrape_metrics and index == 0,
        }
    )


# ----------------------------------------------------------------------------------------- barrier
class Barrier:
    """Shard 0's rendezvous: ``GET /barrier/<step>?shard=<i>`` returns once every shard has arrived."""

    def __init__(self, shards: int, port: int, timeout_s: float, lead_s: float = 1.0) -> None:
        self.shards = shards
        self.timeout_s = timeout_s
        self.lead_s = lead_s
        self._arrived: dict[int, set[int]] = {}
        self._start_at: dict[int, float] = {}
        self._cond = threading.Condition()
        barrier = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                try:
                    path, _, query = self.path.partition("?")
                    step = int(path.rstrip("/").rsplit("/", 1)[-1])
                    shard = int(dict(p.split("=", 1) for p in query.split("&") if "=" in p)["shard"])
                    start_at = barrier.arrive(step, shard)
                except (ValueError, KeyError, TimeoutError) as exc:
                    self.send_response(504 if isinstance(exc, TimeoutError) else 400)
                    self.end_headers()
                    self.wfile.write(str(exc).encode())
                    return
                body = json.dumps({"start_at": start_at}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="barrier")
        self._thread.start()

    def arrive(self, step: int, shard: int) -> float:
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            self._arrived.setdefault(step, set()).add(shard)
            if len(self._arrived[step]) >= self.shards and step not in self._start_at:
                self._start_at[step] = time.time() + self.lead_s
                self._cond.notify_all()
            while step not in self._start_at:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(range(self.shards)) - self._arrived[step])
                    raise TimeoutError(f"barrier {step}: shards {missing} did not arrive")
                self._cond.wait(left)
            return self._start_at[step]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def remote_barrier(host: str, port: int, timeout_s: float) -> Callable[[int, int], float]:
    def wait(step: int, shard: int) -> float:
        deadline = time.monotonic() + timeout_s
        url = f"http://{host}:{port}/barrier/{step}?shard={shard}"
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:  # shard 0 may not be up yet (DNS, server start): retry until the deadline
                with urllib.request.urlopen(url, timeout=max(1.0, deadline - time.monotonic())) as resp:
                    return float(json.loads(resp.read())["start_at"])
            except Exception as exc:
                last = exc
                time.sleep(1.0)
        raise EngineError(f"Load-generator shard {shard} could not meet the others at {url}: {last}")

    return wait


# ------------------------------------------------------------------------------------------ framing
def encode_results(shard: int, payload: dict[str, Any]) -> list[str]:
    data = base64.b64encode(gzip.compress(json.dumps(payload).encode())).decode()
    digest = hashlib.sha256(data.encode()).hexdigest()
    parts = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)] or [""]
    lines = [f"{BEGIN} shard={shard} parts={len(parts)} sha256={digest}"]
    lines += [f"{PART} shard={shard} {i} {p}" for i, p in enumerate(parts)]
    lines.append(f"{END} shard={shard}")
    return lines


def decode_results(log: str) -> dict[str, Any]:
    """The payload framed in a pod's log; ``EngineError`` when absent, truncated or corrupt."""
    header: dict[str, str] | None = None
    parts: dict[int, str] = {}
    ended = False
    for line in log.splitlines():
        line = line.strip()
        if line.startswith(BEGIN):
            header = dict(tok.split("=", 1) for tok in line.split()[1:])
            parts, ended = {}, False
        elif line.startswith(PART) and header is not None:
            _, _shard, idx, *rest = line.split(" ", 3)
            parts[int(idx)] = rest[0] if rest else ""
        elif line.startswith(END) and header is not None:
            ended = True
    if header is None:
        raise EngineError("The load generator's log holds no results (it failed before writing them).")
    expected = int(header["parts"])
    if not ended or len(parts) != expected:
        raise EngineError(
            f"The load generator's results are truncated in its log ({len(parts)} of {expected} parts).",
            hint="The node's log rotation may have cut them: raise the kubelet's containerLogMaxSize or "
            "run fewer requests per cell.",
        )
    data = "".join(parts[i] for i in range(expected))
    if hashlib.sha256(data.encode()).hexdigest() != header["sha256"]:
        raise EngineError("The load generator's results are corrupt (checksum mismatch).")
    payload: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(data)))
    return payload
