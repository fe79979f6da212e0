"""Tests for marginmine.data.download against a local HTTP server on 127.0.0.1 (tests/httpserver.py)."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import marginmine.data.download as dl
from httpserver import FAST, MB, PAYLOAD, SHA, SIZE, WRONG_SHA, ServerState, serving
from marginmine.data.download import download, file_sha256
from marginmine.errors import DownloadError, MarginmineError


@pytest.fixture
def server() -> Iterator[ServerState]:
    with serving() as state:
        yield state


def part_of(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


# --- plain downloads -------------------------------------------------------------


def test_plain_download(server: ServerState, tmp_path: Path) -> None:
    dest = tmp_path / "sub" / "payload.bin"
    assert download(server.file_url, dest, **FAST) == dest
    assert dest.read_bytes() == PAYLOAD
    assert not part_of(dest).exists()
    assert server.ranges() == [None]
    assert server.bytes_served == SIZE


def test_accepts_str_dest(server: ServerState, tmp_path: Path) -> None:
    dest = download(server.file_url, str(tmp_path / "payload.bin"), **FAST)
    assert isinstance(dest, Path) and dest.read_bytes() == PAYLOAD


@pytest.mark.parametrize("sha", [SHA, SHA.upper(), f"  {SHA}\n"])
def test_checksum_ok(server: ServerState, tmp_path: Path, sha: str) -> None:
    dest = download(server.file_url, tmp_path / "payload.bin", sha256=sha, **FAST)
    assert file_sha256(dest) == SHA


def test_checksum_mismatch_leaves_nothing(server: ServerState, tmp_path: Path) -> None:
    dest = tmp_path / "payload.bin"
    with pytest.raises(DownloadError) as info:
        download(server.file_url, dest, sha256=WRONG_SHA, **FAST)
    message = str(info.value)
    assert "SHA-256 mismatch" in message and SHA in message and WRONG_SHA in message
    assert server.file_url in message and str(dest) in message
    assert not dest.exists() and not part_of(dest).exists()
    assert len(server.requests) == 1  # a wrong checksum is not retried
    assert isinstance(info.value, MarginmineError)


def test_invalid_checksum_is_rejected_early(server: ServerState, tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="64 hex digits"):
        download(server.file_url, tmp_path / "x", sha256="abc", **FAST)
    assert server.requests == []


# --- resuming ---------------------------------------------------------------------


def test_resume_after_dropped_connection(server: ServerState, tmp_path: Path) -> None:
    server.drop_requests = 1
    dest = tmp_path / "payload.bin"
    download(server.file_url, dest, sha256=SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert server.ranges() == [None, f"bytes={MB}-"]
    assert server.bytes_served < 2 * SIZE
    assert server.bytes_served == SIZE  # nothing was fetched twice


def test_every_retry_resumes(server: ServerState, tmp_path: Path) -> None:
    server.drop_requests, server.drop_after = 4, 700_000
    dest = tmp_path / "payload.bin"
    download(server.file_url, dest, sha256=SHA, retries=4, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert server.ranges() == [None] + [f"bytes={n * 700_000}-" for n in range(1, 5)]
    assert server.bytes_served == SIZE


def test_server_ignoring_range(server: ServerState, tmp_path: Path) -> None:
    server.drop_requests, server.ignore_range = 1, True
    dest = tmp_path / "payload.bin"
    download(server.file_url, dest, sha256=SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert server.ranges() == [None, f"bytes={MB}-"]  # asked to resume, got 200: restarted


def test_leftover_part_file_is_resumed(server: ServerState, tmp_path: Path) -> None:
    dest = tmp_path / "payload.bin"
    part_of(dest).write_bytes(PAYLOAD[:MB])
    download(server.file_url, dest, sha256=SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert server.ranges() == [f"bytes={MB}-"]
    assert server.bytes_served == SIZE - MB


def test_complete_part_file_gets_416_and_is_finalised(server: ServerState, tmp_path: Path) -> None:
    dest = tmp_path / "payload.bin"
    part_of(dest).write_bytes(PAYLOAD)
    download(server.file_url, dest, sha256=SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD and not part_of(dest).exists()
    assert server.ranges() == [f"bytes={SIZE}-"]
    assert server.bytes_served == 0


def test_oversized_part_file_restarts(server: ServerState, tmp_path: Path) -> None:
    dest = tmp_path / "payload.bin"
    part_of(dest).write_bytes(PAYLOAD + b"trailing junk")
    download(server.file_url, dest, sha256=SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert server.ranges() == [f"bytes={SIZE + 13}-", None]


def test_stale_part_file_with_other_content_restarts(server: ServerState, tmp_path: Path) -> None:
    dest = tmp_path / "payload.bin"
    part_of(dest).write_bytes(b"\0" * MB)  # e.g. left over from an older version of the file
    download(server.file_url, dest, sha256=SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert server.ranges() == [f"bytes={MB}-", None]


def test_read_timeout_is_retried_and_resumed(server: ServerState, tmp_path: Path) -> None:
    server.stall_requests, server.stall_seconds = 1, 1.0
    dest = tmp_path / "payload.bin"
    download(server.file_url, dest, sha256=SHA, backoff=0.01, timeout=0.25)
    assert dest.read_bytes() == PAYLOAD
    assert len(server.requests) == 2
    second = server.ranges()[1]  # resumed from the bytes received before the stall
    assert second is not None and 0 < int(second[6:-1]) <= server.stall_after


def test_exhausted_drops_keep_part_for_next_run(server: ServerState, tmp_path: Path) -> None:
    server.drop_requests, server.drop_after = 2, 500_000
    dest = tmp_path / "payload.bin"
    with pytest.raises(DownloadError) as info:
        download(server.file_url, dest, retries=1, **FAST)
    assert "connection closed after" in str(info.value) and "2 attempt(s)" in str(info.value)
    assert str(part_of(dest)) in str(info.value)
    assert part_of(dest).stat().st_size == 1_000_000 and not dest.exists()
    download(server.file_url, dest, sha256=SHA, **FAST)  # a rerun resumes
    assert dest.read_bytes() == PAYLOAD
    assert server.ranges()[-1] == "bytes=1000000-"
    assert server.bytes_served == SIZE


# --- retries and errors ---------------------------------------------------------------


@pytest.mark.parametrize("status", [503, 500, 429, 408])
def test_transient_status_then_success(
    server: ServerState, tmp_path: Path, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    server.fail_requests, server.fail_status = 2, status
    caplog.set_level(logging.INFO, logger="marginmine.data.download")
    dest = download(server.file_url, tmp_path / "payload.bin", sha256=SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert len(server.requests) == 3
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and f"HTTP {status}" in warnings[0].getMessage()


@pytest.mark.parametrize("status", [404, 403, 410])
def test_client_error_raises_at_once(server: ServerState, tmp_path: Path, status: int) -> None:
    server.fail_requests, server.fail_status = 100, status
    dest = tmp_path / "payload.bin"
    started = time.monotonic()
    with pytest.raises(DownloadError) as info:
        download(server.file_url, dest, backoff=10.0, timeout=5.0)
    assert time.monotonic() - started < 5  # no backoff sleep happened
    assert len(server.requests) == 1
    message = str(info.value)
    assert f"HTTP {status}" in message and server.file_url in message and "1 attempt(s)" in message
    assert not dest.exists() and not part_of(dest).exists()


def test_missing_path_is_404(server: ServerState, tmp_path: Path) -> None:
    url = f"{server.url}/no/such/file"
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(url, tmp_path / "x", **FAST)
    assert len(server.requests) == 1


def test_retries_exhausted_message(server: ServerState, tmp_path: Path) -> None:
    server.fail_requests = 100
    dest = tmp_path / "payload.bin"
    with pytest.raises(DownloadError) as info:
        download(server.file_url, dest, retries=2, **FAST)
    message = str(info.value)
    assert server.file_url in message
    assert "3 attempt(s)" in message and "HTTP 503" in message
    assert "check the URL or network" in message and f"stage the file by hand at {dest}" in message
    assert len(server.requests) == 3
    assert not dest.exists()


def test_connection_refused_is_retried(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/payload.bin"
    with pytest.raises(DownloadError) as info:
        download(url, tmp_path / "x", retries=2, **FAST)
    assert url in str(info.value) and "3 attempt(s)" in str(info.value)


def test_backoff_is_exponential(
    server: ServerState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    delays: list[float] = []
    monkeypatch.setattr(dl.time, "sleep", delays.append)
    server.fail_requests = 3
    download(server.file_url, tmp_path / "payload.bin", backoff=0.5, timeout=5.0)
    assert delays == [0.5, 1.0, 2.0]


def test_retry_after_is_honoured_and_capped() -> None:
    assert dl._delay(0.01, 1, 3.0) == 3.0
    assert dl._delay(0.01, 1, 10_000.0) == dl.MAX_DELAY
    assert dl._delay(2.0, 20, None) == dl.MAX_DELAY


def test_unsupported_scheme(tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="unsupported URL scheme 'ftp'"):
        download("ftp://example.org/x", tmp_path / "x", **FAST)


# --- existing destination ---------------------------------------------------------------


def test_existing_dest_with_matching_sha_is_kept(server: ServerState, tmp_path: Path) -> None:
    dest = tmp_path / "payload.bin"
    dest.write_bytes(PAYLOAD)
    mtime = dest.stat().st_mtime_ns
    assert download(server.file_url, dest, sha256=SHA, **FAST) == dest
    assert server.requests == []
    assert dest.stat().st_mtime_ns == mtime


def test_existing_dest_with_wrong_content_is_replaced(server: ServerState, tmp_path: Path) -> None:
    dest = tmp_path / "payload.bin"
    dest.write_bytes(b"old version")
    download(server.file_url, dest, sha256=SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert server.ranges() == [None]


def test_existing_dest_without_sha_is_replaced(server: ServerState, tmp_path: Path) -> None:
    dest = tmp_path / "payload.bin"
    dest.write_bytes(b"old version")
    download(server.file_url, dest, **FAST)
    assert dest.read_bytes() == PAYLOAD


def test_failed_download_keeps_old_dest(server: ServerState, tmp_path: Path) -> None:
    server.fail_requests = 100
    dest = tmp_path / "payload.bin"
    dest.write_bytes(b"old version")
    with pytest.raises(DownloadError):
        download(server.file_url, dest, retries=1, **FAST)
    assert dest.read_bytes() == b"old version"


# --- local sources ---------------------------------------------------------------------


@pytest.fixture
def local_source(tmp_path: Path) -> Path:
    source = tmp_path / "source dir" / "payload.bin"
    source.parent.mkdir()
    source.write_bytes(PAYLOAD)
    return source


def test_file_url(local_source: Path, tmp_path: Path) -> None:
    dest = download(local_source.as_uri(), tmp_path / "out" / "payload.bin", sha256=SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert not part_of(dest).exists()


def test_plain_local_path(local_source: Path, tmp_path: Path) -> None:
    dest = download(str(local_source), tmp_path / "out.bin", sha256=SHA, **FAST)
    assert dest.read_bytes() == PAYLOAD


def test_local_copy_resumes_part_file(local_source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "out.bin"
    part_of(dest).write_bytes(PAYLOAD[:MB])
    done: list[int] = []
    download(str(local_source), dest, sha256=SHA, progress=lambda n, total: done.append(n), **FAST)
    assert dest.read_bytes() == PAYLOAD
    assert done[-1] == SIZE and all(n > MB for n in done)


def test_local_checksum_mismatch(local_source: Path, tmp_path: Path) -> None:
    dest = tmp_path / "out.bin"
    with pytest.raises(DownloadError, match="SHA-256 mismatch"):
        download(local_source.as_uri(), dest, sha256=WRONG_SHA, **FAST)
    assert not dest.exists() and not part_of(dest).exists()


def test_missing_local_file_raises_at_once(tmp_path: Path) -> None:
    missing = tmp_path / "nope.bin"
    started = time.monotonic()
    with pytest.raises(DownloadError) as info:
        download(missing.as_uri(), tmp_path / "out.bin", backoff=10.0)
    assert time.monotonic() - started < 5
    assert "no such file" in str(info.value) and "1 attempt(s)" in str(info.value)


# --- progress and logging ---------------------------------------------------------------


def test_progress_is_throttled_and_reaches_total(server: ServerState, tmp_path: Path) -> None:
    calls: list[tuple[int, int | None]] = []
    dest = tmp_path / "p.bin"
    download(server.file_url, dest, progress=lambda d, t: calls.append((d, t)), **FAST)
    assert calls[-1] == (SIZE, SIZE)
    assert all(total == SIZE for _, total in calls)
    done = [d for d, _ in calls]
    assert done == sorted(done)
    assert 1 <= len(calls) <= SIZE // MB + 2


def test_progress_counts_resumed_bytes(server: ServerState, tmp_path: Path) -> None:
    server.drop_requests = 1
    calls: list[int] = []
    download(server.file_url, tmp_path / "p.bin", progress=lambda d, t: calls.append(d), **FAST)
    assert calls[-1] == SIZE


def test_logging(server: ServerState, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    server.drop_requests = 1
    caplog.set_level(logging.INFO, logger="marginmine.data.download")
    download(server.file_url, tmp_path / "payload.bin", **FAST)
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(m.startswith(f"downloading {server.file_url}") for m in infos)
    assert any("MB/s" in m and f"{SIZE} bytes" in m for m in infos)
    assert len(warnings) == 1 and "attempt 1/6" in warnings[0] and "retrying" in warnings[0]
