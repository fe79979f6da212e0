"""A local HTTP server on 127.0.0.1 for the download tests (tests/test_download.py): it serves one
payload with Range support and can drop, stall, fail or ignore ranges on request."""

from __future__ import annotations

import hashlib
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAYLOAD = random.Random(20240611).randbytes(3 * 1024 * 1024 + 4321)
SIZE = len(PAYLOAD)
SHA = hashlib.sha256(PAYLOAD).hexdigest()
WRONG_SHA = "0" * 64
MB = 1024 * 1024
FAST = {"backoff": 0.01, "timeout": 5.0}


@dataclass
class Seen:
    """One request as the server saw it."""

    path: str
    range: str | None


@dataclass
class ServerState:
    """Behaviour switches and counters shared with the handler."""

    url: str = ""
    drop_requests: int = 0  # the first K requests send drop_after bytes, then close
    drop_after: int = MB
    fail_requests: int = 0  # the first K requests get fail_status
    fail_status: int = 503
    ignore_range: bool = False  # always answer 200 with the whole file
    stall_requests: int = 0  # the first K requests send stall_after bytes, then stall
    stall_after: int = 100_000
    stall_seconds: float = 1.0
    requests: list[Seen] = field(default_factory=list)
    bytes_served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def file_url(self) -> str:
        return f"{self.url}/data/payload.bin"

    def ranges(self) -> list[str | None]:
        return [seen.range for seen in self.requests]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: ServerState


class Handler(BaseHTTPRequestHandler):
    """Serves PAYLOAD with Range support plus flaky/failing/ignoring modes."""

    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        state = self.server.state
        with state.lock:
            index = len(state.requests)
            state.requests.append(Seen(self.path, self.headers.get("Range")))
        if self.path != "/data/payload.bin":
            self._empty(404)
        elif index < state.fail_requests:
            self._empty(state.fail_status)
        else:
            self._serve(state, index)

    def _empty(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _serve(self, state: ServerState, index: int) -> None:
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        start = int(match.group(1)) if match and not state.ignore_range else 0
        if start >= SIZE:
            self._empty(416, {"Content-Range": f"bytes */{SIZE}"})
            return
        body = PAYLOAD[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{SIZE - 1}/{SIZE}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if index < state.drop_requests:
            body = body[: state.drop_after]
            self.close_connection = True
        self._write(state, body, stall=index < state.stall_requests)

    def _write(self, state: ServerState, body: bytes, *, stall: bool) -> None:
        if stall:
            self._send(state, body[: state.stall_after])
            time.sleep(state.stall_seconds)
            self.close_connection = True
            return
        self._send(state, body)

    def _send(self, state: ServerState, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            return
        with state.lock:
            state.bytes_served += len(data)


@contextmanager
def serving() -> Iterator[ServerState]:
    """The server running in a thread; its state, shut down on exit."""
    httpd = _Server(("127.0.0.1", 0), Handler)
    httpd.state = ServerState(url=f"http://127.0.0.1:{httpd.server_port}")
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield httpd.state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
