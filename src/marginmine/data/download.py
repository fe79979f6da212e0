"""Resumable, retried, SHA-256-checked downloads (HTTP(S), ``file://`` or a local path).

Data goes to ``<dest>.part`` and is renamed to ``dest`` only once complete and
verified, so ``dest`` never holds a partial file.  A leftover part file (from an
interrupted run or a dropped connection) is resumed with an HTTP Range request.
Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import io
import logging
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from marginmine import __version__
from marginmine.errors import DownloadError
from marginmine.io.safe import sha256_file

log = logging.getLogger(__name__)

Progress = Callable[[int, int | None], None]
"""``progress(bytes_done, total_or_None)``; bytes_done counts resumed bytes too."""

CHUNK_SIZE = 1 << 16
PROGRESS_BYTES = 1 << 20
PROGRESS_SECONDS = 1.0
MAX_DELAY = 60.0
USER_AGENT = f"marginmine/{__version__} (python-urllib)"

_RETRY_STATUS = frozenset({408, 429})
_SCHEMES = frozenset({"http", "https", "file"})
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_UNSATISFIED_RANGE = re.compile(r"bytes\s+\*/(\d+)")


class _Retryable(Exception):
    """A transient failure: the next attempt resumes from the part file."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class _Fatal(Exception):
    """A failure that retrying cannot fix."""

    def __init__(self, message: str, advice: str | None = None):
        super().__init__(message)
        self.advice = advice


class _Stream(Protocol):
    def read1(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


@dataclass
class _Body:
    """An open source: ``stream`` yields the bytes from offset ``start`` on."""

    stream: _Stream
    start: int
    size: int | None  # full size of the file, when known


@dataclass
class _Job:
    """One ``download`` call: where from, where to, and what to check."""

    url: str
    dest: Path
    sha256: str | None
    timeout: float
    progress: Progress | None
    stale_part: bool = False  # a part file from an earlier run was present
    fetched: int = 0  # bytes transferred during this call

    @property
    def part(self) -> Path:
        return self.dest.with_name(self.dest.name + ".part")


def download(
    url: str,
    dest: Path | str,
    *,
    sha256: str | None = None,
    retries: int = 5,
    timeout: float = 60,
    backoff: float = 2.0,
    progress: Progress | None = None,
) -> Path:
    """Fetch ``url`` to ``dest`` (resuming, retrying, verifying) and return ``dest``.

    ``url`` may be http(s)://, file:// or a plain local path.  With ``sha256``
    an existing matching ``dest`` is kept as is (without it, ``dest`` is fetched
    again and replaced only on success).  ``retries`` is the number of
    attempts after the first; the wait before retry n is ``backoff * 2**(n-1)``
    seconds (capped at 60).  ``timeout`` applies to each connect and read.
    Raises DownloadError when all attempts fail or the checksum mismatches.
    """
    dest = Path(dest)
    job = _Job(url, dest, _normalise_sha(url, sha256), timeout, progress)
    _check_scheme(url, dest)
    if _already_present(job):
        return dest
    _local_io(job, "create the folder of", dest.parent.mkdir, parents=True, exist_ok=True)
    job.stale_part = job.part.exists()
    _log_start(job)
    started = time.monotonic()
    _run_attempts(job, retries, backoff)
    _local_io(job, "rename the finished download to", os.replace, job.part, dest)
    _log_done(job, time.monotonic() - started)
    return dest


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a local file."""
    return sha256_file(path)


# --- orchestration -------------------------------------------------------------


def _normalise_sha(url: str, sha256: str | None) -> str | None:
    if sha256 is None:
        return None
    value = sha256.strip().lower()
    if not _SHA256.fullmatch(value):
        raise DownloadError(
            f"invalid SHA-256 {sha256!r} for {url}: expected 64 hex digits; "
            "fix the checksum and rerun"
        )
    return value


def _check_scheme(url: str, dest: Path) -> None:
    scheme = urlsplit(url).scheme.lower()
    if scheme and scheme not in _SCHEMES and not _is_drive_letter(scheme):
        raise DownloadError(
            f"cannot download {url}: unsupported URL scheme {scheme!r} (use http, https, file "
            f"or a local path), or stage the file by hand at {dest} and rerun"
        )


def _already_present(job: _Job) -> bool:
    if job.sha256 is None or not job.dest.is_file():
        return False
    if file_sha256(job.dest) == job.sha256:
        log.info("%s already present with the expected SHA-256; not downloading", job.dest)
        return True
    log.info("%s exists but its SHA-256 differs; downloading %s again", job.dest, job.url)
    return False


def _local_io(
    job: _Job, what: str, func: Callable[..., object], *args: object, **kwargs: object
) -> None:
    """Run a local file operation; turn OSError into a DownloadError."""
    try:
        func(*args, **kwargs)
    except OSError as exc:
        raise DownloadError(
            f"download of {job.url}: cannot {what} {job.dest}: {exc}; "
            "check free disk space and permissions, then rerun"
        ) from exc


def _log_start(job: _Job) -> None:
    offset = _size(job.part)
    if offset:
        log.info("downloading %s -> %s (resuming at byte %d)", job.url, job.dest, offset)
    else:
        log.info("downloading %s -> %s", job.url, job.dest)


def _log_done(job: _Job, seconds: float) -> None:
    rate = job.fetched / 1e6 / seconds if seconds > 0 else float("inf")
    log.info(
        "downloaded %s -> %s: %d bytes in %.2f s (%.1f MB/s)",
        job.url, job.dest, job.fetched, seconds, rate,
    )


def _run_attempts(job: _Job, retries: int, backoff: float) -> None:
    attempts = max(0, retries) + 1
    for attempt in range(1, attempts + 1):
        try:
            _attempt(job)
            return
        except _Fatal as exc:
            raise DownloadError(_failure(job, attempt, exc)) from exc
        except _Retryable as exc:
            if attempt == attempts:
                raise DownloadError(_failure(job, attempt, exc)) from exc
            delay = _delay(backoff, attempt, exc.retry_after)
            log.warning(
                "attempt %d/%d for %s failed: %s; retrying in %.2f s",
                attempt, attempts, job.url, exc, delay,
            )
            time.sleep(delay)


def _delay(backoff: float, attempt: int, retry_after: float | None) -> float:
    delay = min(backoff * 2 ** (attempt - 1), MAX_DELAY)
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_DELAY))
    return delay


def _failure(job: _Job, attempts: int, exc: Exception) -> str:
    advice = getattr(exc, "advice", None) or (
        f"check the URL or network, or stage the file by hand at {job.dest} and rerun"
    )
    text = f"download of {job.url} failed after {attempts} attempt(s): {exc}; {advice}"
    if isinstance(exc, _Retryable) and job.part.exists():
        text += f" (the partial file {job.part} is kept and a rerun resumes it)"
    return text


def _attempt(job: _Job) -> None:
    offset = _size(job.part)
    body = _open(job.url, offset, job.timeout)
    with contextlib.closing(body.stream):
        if offset and body.start == 0:
            log.info("%s: cannot resume at byte %d; restarting from byte 0", job.url, offset)
        try:
            digest = _receive(job, body)
        except OSError as exc:  # network errors are already _Retryable here
            raise _Fatal(
                f"cannot write {job.part}: {exc}",
                advice="check free disk space and permissions, then rerun",
            ) from exc
    _check_digest(job, digest, resumed=body.start > 0)


# --- transfer ------------------------------------------------------------------


def _receive(job: _Job, body: _Body) -> str:
    """Append (or write afresh) ``body`` to the part file; return its hex SHA-256."""
    hasher = hashlib.sha256()
    if body.start and job.sha256:
        _hash_prefix(hasher, job.part, body.start)
    meter = _Meter(job.progress, body.size)
    done = body.start
    with open(job.part, "r+b" if body.start else "wb") as out:
        out.seek(body.start)
        out.truncate()
        while chunk := _read(body.stream):
            out.write(chunk)
            if job.sha256:
                hasher.update(chunk)
            done += len(chunk)
            job.fetched += len(chunk)
            meter.update(done)
        out.flush()
        os.fsync(out.fileno())
    if body.size is not None and done < body.size:
        raise _Retryable(f"connection closed after {done} of {body.size} bytes")
    meter.finish(done)
    return hasher.hexdigest()


def _read(stream: _Stream) -> bytes:
    try:
        return stream.read1(CHUNK_SIZE)
    except (OSError, http.client.HTTPException) as exc:
        raise _Retryable(f"error while reading: {_describe(exc)}") from exc


def _check_digest(job: _Job, digest: str, *, resumed: bool) -> None:
    if job.sha256 is None or digest == job.sha256:
        return
    job.part.unlink(missing_ok=True)
    if resumed and job.stale_part:
        job.stale_part = False  # the part file may belong to an older version: start afresh
        raise _Retryable("SHA-256 mismatch after resuming a part file from an earlier run")
    raise _Fatal(
        f"SHA-256 mismatch: expected {job.sha256}, got {digest}",
        advice=(
            f"the partial file was deleted; check the URL and the expected checksum, "
            f"or stage the file by hand at {job.dest} and rerun"
        ),
    )


def _hash_prefix(hasher: hashlib._Hash, path: Path, limit: int | None) -> None:
    """Feed the first ``limit`` bytes of ``path`` (all if None) to ``hasher``."""
    remaining = limit
    with open(path, "rb") as handle:
        while remaining is None or remaining > 0:
            want = CHUNK_SIZE if remaining is None else min(CHUNK_SIZE, remaining)
            chunk = handle.read(want)
            if not chunk:
                break
            hasher.update(chunk)
            if remaining is not None:
                remaining -= len(chunk)


class _Meter:
    """Calls ``progress`` at most every PROGRESS_BYTES or PROGRESS_SECONDS."""

    def __init__(self, callback: Progress | None, total: int | None):
        self.callback = callback
        self.total = total
        self.last_done = -1
        self.last_time = time.monotonic()

    def update(self, done: int) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        if done - self.last_done >= PROGRESS_BYTES or now - self.last_time >= PROGRESS_SECONDS:
            self._emit(done, now)

    def finish(self, done: int) -> None:
        if self.callback is not None and done != self.last_done:
            self._emit(done, time.monotonic())

    def _emit(self, done: int, now: float) -> None:
        assert self.callback is not None
        self.callback(done, self.total)
        self.last_done, self.last_time = done, now


# --- opening sources -----------------------------------------------------------


def _open(url: str, offset: int, timeout: float) -> _Body:
    local = _local_path(url)
    if local is not None:
        return _open_local(local, offset)
    return _open_http(url, offset, timeout)


def _is_drive_letter(scheme: str) -> bool:
    return os.name == "nt" and len(scheme) == 1


def _local_path(url: str) -> Path | None:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return Path(urllib.request.url2pathname(parts.path))
    if not scheme or _is_drive_letter(scheme):
        return Path(url)
    return None


def _open_local(path: Path, offset: int) -> _Body:
    try:
        handle = open(path, "rb")
    except FileNotFoundError as exc:
        raise _Fatal(f"no such file: {path}") from exc
    except OSError as exc:
        raise _Fatal(f"cannot read {path}: {exc.strerror or exc}") from exc
    size = os.fstat(handle.fileno()).st_size
    start = offset if offset <= size else 0
    handle.seek(start)
    return _Body(handle, start, size)


def _open_http(url: str, offset: int, timeout: float) -> _Body:
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    request = urllib.request.Request(url, headers=headers)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        return _http_error(exc, url, offset, timeout)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if isinstance(exc, ValueError):  # malformed URL: retrying cannot help
            raise _Fatal(f"invalid URL: {exc}") from exc
        raise _Retryable(_describe(exc)) from exc
    return _http_body(response, url, offset, timeout)


def _http_body(
    response: http.client.HTTPResponse, url: str, offset: int, timeout: float
) -> _Body:
    status = response.status
    if status == 200:
        return _Body(response, 0, _int_header(response.headers, "Content-Length"))
    if status == 206:
        parsed = _parse_content_range(response.headers.get("Content-Range"))
        if parsed is not None and parsed[0] == offset:
            return _Body(response, offset, parsed[1])
        response.close()
        log.warning("%s: unusable Content-Range for a resume at byte %d", url, offset)
        return _open_http(url, 0, timeout)
    response.close()
    raise _Fatal(f"unexpected HTTP status {status} {response.reason}")


def _http_error(exc: urllib.error.HTTPError, url: str, offset: int, timeout: float) -> _Body:
    headers = exc.headers if exc.headers is not None else Message()
    message = f"HTTP {exc.code} {exc.reason}"
    exc.close()
    if exc.code == 416 and offset:
        return _range_not_satisfiable(headers.get("Content-Range"), url, offset, timeout)
    if exc.code >= 500 or exc.code in _RETRY_STATUS:
        raise _Retryable(message, _retry_after(headers))
    raise _Fatal(message)


def _range_not_satisfiable(
    content_range: str | None, url: str, offset: int, timeout: float
) -> _Body:
    """HTTP 416: the part file is complete if it has the remote size, else restart."""
    match = _UNSATISFIED_RANGE.fullmatch((content_range or "").strip())
    remote = int(match.group(1)) if match else None
    if remote == offset:
        log.info("%s: part file already complete (%d bytes)", url, offset)
        return _Body(io.BytesIO(b""), offset, offset)
    log.warning(
        "%s: part file has %d bytes but the server reports %s; restarting from byte 0",
        url, offset, remote if remote is not None else "an unknown size",
    )
    return _open_http(url, 0, timeout)


def _parse_content_range(value: str | None) -> tuple[int, int] | None:
    """``(start, full size)`` from ``bytes start-end/size``; None if unusable."""
    match = _CONTENT_RANGE.fullmatch((value or "").strip())
    if match is None:
        return None
    start, end, size = match.groups()
    return int(start), int(end) + 1 if size == "*" else int(size)


def _int_header(headers: Message, name: str) -> int | None:
    value = (headers.get(name) or "").strip()
    return int(value) if value.isdigit() else None


def _retry_after(headers: Message) -> float | None:
    return float(value) if (value := _int_header(headers, "Retry-After")) is not None else None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        reason = exc.reason
        if isinstance(reason, BaseException):
            return f"{type(reason).__name__}: {reason}"
        return str(reason)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
