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
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from marginmine.data.sources import (
    SCHEMES,
    Body,
    Fatal,
    Retryable,
    Stream,
    describe_error,
    file_size,
    is_drive_letter,
    open_source,
)
from marginmine.errors import DownloadError
from marginmine.io.safe import sha256_file

Progress = Callable[[int, int | None], None]
"""``progress(bytes_done, total_or_None)``; bytes_done counts resumed bytes too."""
CHUNK_SIZE = 1 << 16
PROGRESS_BYTES = 1 << 20
PROGRESS_SECONDS = 1.0
MAX_DELAY = 60.0
_SHA256 = re.compile(r"[0-9a-f]{64}")


log = logging.getLogger(__name__)

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
    if scheme and scheme not in SCHEMES and not is_drive_letter(scheme):
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
    offset = file_size(job.part)
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
        except Fatal as exc:
            raise DownloadError(_failure(job, attempt, exc)) from exc
        except Retryable as exc:
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
    if isinstance(exc, Retryable) and job.part.exists():
        text += f" (the partial file {job.part} is kept and a rerun resumes it)"
    return text


def _attempt(job: _Job) -> None:
    offset = file_size(job.part)
    body = open_source(job.url, offset, job.timeout)
    with contextlib.closing(body.stream):
        if offset and body.start == 0:
            log.info("%s: cannot resume at byte %d; restarting from byte 0", job.url, offset)
        try:
            digest = _receive(job, body)
        except OSError as exc:  # network errors are already Retryable here
            raise Fatal(
                f"cannot write {job.part}: {exc}",
                advice="check free disk space and permissions, then rerun",
            ) from exc
    _check_digest(job, digest, resumed=body.start > 0)


# --- transfer ------------------------------------------------------------------


def _receive(job: _Job, body: Body) -> str:
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
        raise Retryable(f"connection closed after {done} of {body.size} bytes")
    meter.finish(done)
    return hasher.hexdigest()


def _read(stream: Stream) -> bytes:
    try:
        return stream.read1(CHUNK_SIZE)
    except (OSError, http.client.HTTPException) as exc:
        raise Retryable(f"error while reading: {describe_error(exc)}") from exc


def _check_digest(job: _Job, digest: str, *, resumed: bool) -> None:
    if job.sha256 is None or digest == job.sha256:
        return
    job.part.unlink(missing_ok=True)
    if resumed and job.stale_part:
        job.stale_part = False  # the part file may belong to an older version: start afresh
        raise Retryable("SHA-256 mismatch after resuming a part file from an earlier run")
    raise Fatal(
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


