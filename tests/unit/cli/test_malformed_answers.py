"""No traceback reaches a user: a server whose /tokenize, /detokenize or /v1/models answers something else, and
an imported result file that is not one, each give a one-line error naming the URL or file, the field and what
was expected, and the CLI exits 2. The server is a real HTTP server on 127.0.0.1 in the test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli.main import app

runner = CliRunner(env={"COLUMNS": "200"})
GOOD = {
    "/tokenize": b'{"tokens": [1, 2, 3], "count": 3}',
    "/detokenize": b'{"prompt": "<|im_start|>"}',
    "/v1/models": b'{"data": [{"id": "m", "object": "model"}]}',
}


class Answers(ThreadingHTTPServer):
    """Answers each path with the bytes in ``answers`` (status 200); anything else 404."""

    answers: dict[str, bytes]


class _Handler(BaseHTTPRequestHandler):
    server: Answers

    def _answer(self) -> None:
        body = self.server.answers.get(self.path.split("?")[0])
        if self.headers.get("Content-Length"):
            self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[Answers]:
    srv = Answers(("127.0.0.1", 0), _Handler)
    srv.answers = dict(GOOD)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _bench(srv: Answers, *extra: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    res = runner.invoke(app, ["bench", "--base-url", url, "--input-len", "8", "--output-len", "2",
                              "--num-prompts", "1", "--no-store", *extra])  # fmt: skip
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.output


@pytest.mark.parametrize(
    ("path", "body", "says"),
    [
        ("/tokenize", b"<html><body>Login</body></html>", "is not valid JSON"),
        ("/tokenize", b'{"count": 3}', "field 'tokens': field required"),
        ("/tokenize", b'{"tokens": ["a", "b"]}', "field 'tokens.0': input should be a valid integer, got a string"),
        ("/tokenize", b'{"tokens": null}', "field 'tokens': input should be a valid list, got null"),
        ("/detokenize", b"<html></html>", "is not valid JSON"),
        ("/detokenize", b'{"text": "x"}', "field 'prompt': field required"),
        ("/v1/models", b'{"data": "x"}', "field 'data': input should be a valid list, got a string"),
        ("/v1/models", b'{"data": []}', "field 'data'"),
        ("/v1/models", b"[1, 2]", "input should be a valid dictionary"),
    ],
)  # fmt: skip
def test_a_malformed_server_answer_is_one_line_naming_url_and_field(
    serve: Answers, path: str, body: bytes, says: str
) -> None:
    serve.answers[path] = body
    code, out = _bench(serve)
    text = " ".join(out.split())
    assert code == 2, out
    assert "Traceback" not in out
    assert f"127.0.0.1:{serve.server_address[1]}{path}" in text, out
    assert says.lower() in text.lower(), out


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (bytes(range(256)) * 4, "is not utf-8 text"),
        (b'{"completed": 1e309, "duration": 1.0}', "1e309 is out of range"),
        (
            b'{"completed": 1, "duration": 1.0, "ttfts": [0.1, 0.2], "latencies": [1]}',
            "not a readable benchmark",
        ),
        (b'{"completed": "four", "duration": 1.0}', "field 'completed' is 'four', not a whole number"),
        (b'{"accelbench": {"format": 1}}', "field 'summary' is missing"),
        (b"[1, 2]", "expected a json object"),
    ],
)
def test_a_malformed_import_file_is_one_line_naming_the_file(
    tmp_path: Path, content: bytes, says: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    res = runner.invoke(app, ["import", "vllm-bench", str(bad), "--label", "x"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "bad.json" in text and says.lower() in text.lower(), res.output


def test_well_formed_answers_are_read(serve: Answers) -> None:
    from accelbench.bench.tokenizer import load_tokenizer
    from accelbench.domain.endpoint import Endpoint
    from accelbench.services.endpoints import first_served_model

    url = f"http://127.0.0.1:{serve.server_address[1]}"
    tok = load_tokenizer(Endpoint(base_url=url, served_model="m"))
    assert tok.encode("anything") == [1, 2, 3] and tok.decode([1]) == "<|im_start|>"
    assert first_served_model(url, {}, None) == "m"


@pytest.mark.parametrize(
    "body", [b'{"data": {"a": 1}}', b'{"data": "x"}', b"<html>", b'{"data": [{"id": 3}]}', b"7"]
)
def test_courtesy_lookups_of_v1_models_shrug_off_a_malformed_answer(serve: Answers, body: bytes) -> None:
    """The engine's name in a run's environment and an endpoint target's served model are courtesies: a bad
    /v1/models answer leaves them unknown (the spec's model is served), with no traceback."""
    from accelbench.deploy.endpoint import ExistingEndpointTarget
    from accelbench.domain.run import EndpointTarget, RunSpec
    from accelbench.telemetry.host import engine_info

    serve.answers["/v1/models"] = body
    url = f"http://127.0.0.1:{serve.server_address[1]}"
    assert engine_info(url)["name"] is None
    target = ExistingEndpointTarget(EndpointTarget(base_url=url))
    spec = RunSpec.model_validate({"model": "m", "target": {"kind": "endpoint", "base_url": url}})
    assert target.deploy(spec).served_model == "m"


@pytest.mark.parametrize("command", ["bench", "sweep", "capacity"])
@pytest.mark.parametrize(
    "url", ["http://[::1", "gopher://127.0.0.1:9/", "127.0.0.1:9", "http://127.0.0.1:99999"]
)
def test_a_base_url_that_is_not_an_http_url_is_a_usage_error(command: str, url: str) -> None:
    res = runner.invoke(app, [command, "--base-url", url])
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "--base-url" in res.output
