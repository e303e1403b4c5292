"""tools.spark's session plumbing without a REST server: the runtime jar, free ports, and servers that never
answer, exit, or answer with another status.

Layer: tests (tools.spark, the standard library's HTTP server and subprocesses; no JVM).
"""

from __future__ import annotations

import http.server
import socket
import sys
import threading
from pathlib import Path

import pytest

from tools.ports import free_port
from tools.spark import RestServer, rest_config_status
from tools.spark_jars import JAR_ENV, JAR_NAME, SparkSetupError, iceberg_runtime_jar


def test_the_runtime_jar_comes_from_the_wheel_or_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(JAR_ENV, raising=False)
    found = Path(iceberg_runtime_jar())
    assert found.name == JAR_NAME and found.is_file()
    own = tmp_path / "my-iceberg-runtime.jar"
    own.write_bytes(b"PK")
    monkeypatch.setenv(JAR_ENV, str(own))
    assert iceberg_runtime_jar() == str(own.resolve())
    monkeypatch.setenv(JAR_ENV, str(tmp_path / "missing.jar"))
    with pytest.raises(SparkSetupError, match="missing.jar"):
        iceberg_runtime_jar()


def test_free_port_is_bindable_and_nothing_answers_there():
    port = free_port()
    assert rest_config_status(f"http://127.0.0.1:{port}", "t") is None
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_a_server_that_never_answers_is_stopped_with_a_clear_error(tmp_path):
    sleeper = [sys.executable, "-c", "print('listening soon', flush=True); import time; time.sleep(120)"]
    with pytest.raises(SparkSetupError, match=r"did not answer GET /v1/config with 200 within 1s") as caught:
        RestServer.ensure(tmp_path, timeout_s=1.0, command=sleeper)
    assert "listening soon" in str(caught.value)


def test_a_server_that_exits_is_reported_with_its_output(tmp_path):
    failing = [sys.executable, "-c", "import sys; print('no such command: serve'); sys.exit(3)"]
    with pytest.raises(SparkSetupError, match=r"exited with code 3[\s\S]*no such command: serve"):
        RestServer.ensure(tmp_path, timeout_s=30.0, command=failing)


def test_icelogs_server_starts_with_a_token_that_looks_like_an_option(tmp_path):
    # random tokens are URL-safe base64: one in 64 starts with "-"
    server = RestServer.ensure(tmp_path, token="-starts-with-a-dash", timeout_s=60.0)
    try:
        assert rest_config_status(server.url, "-starts-with-a-dash") == 200
        assert rest_config_status(server.url, "wrong") == 401
    finally:
        server.stop()


class _ConfigHandler(http.server.BaseHTTPRequestHandler):

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        ok = self.path == "/v1/config" and self.headers.get("Authorization") == "Bearer right"
        self.send_response(200 if ok else 401)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args) -> None:
        pass


def test_a_running_server_is_reused_and_a_foreign_one_refused(tmp_path):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ConfigHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    try:
        server = RestServer.ensure(tmp_path, port=port, token="right")
        assert not server.started_here and server.url == f"http://127.0.0.1:{port}"
        conf = server.catalog_conf("icelog")
        assert conf["spark.sql.catalog.icelog.type"] == "rest"
        assert conf["spark.sql.catalog.icelog.uri"] == server.url
        assert conf["spark.sql.catalog.icelog.token"] == "right"
        server.stop()  # not started here: nothing to stop, and the server still answers
        assert rest_config_status(server.url, "right") == 200
        with pytest.raises(SparkSetupError, match="answered 401"):
            RestServer.ensure(tmp_path, port=port, token="wrong")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_stopping_a_server_handle_deletes_only_the_output_file_ensure_made(tmp_path):
    """A handle cannot be given a file to delete (its output file is one ensure() made); a handle of the caller's
    process leaves every file alone when stopped, and ensure() removes its own output file."""
    import subprocess
    import tempfile

    mine = tmp_path / "my-notes.log"
    mine.write_text("keep me")
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    port = free_port("127.0.0.1")
    with pytest.raises(TypeError):
        RestServer(str(tmp_path), "127.0.0.1", port, "t", process, str(mine))  # type: ignore[call-arg]
    handle = RestServer(str(tmp_path), "127.0.0.1", port, "t", process)
    assert handle.log_path is None
    handle.stop()
    assert process.poll() is not None and mine.read_text() == "keep me"
    before = set(Path(tempfile.gettempdir()).glob("icelog-serve-*.log"))
    failing = [sys.executable, "-c", "import sys; print('bye'); sys.exit(3)"]
    with pytest.raises(SparkSetupError, match="bye"):
        RestServer.ensure(tmp_path, timeout_s=30.0, command=failing)
    assert set(Path(tempfile.gettempdir()).glob("icelog-serve-*.log")) == before
