"""Where a download's bytes come from: opening an HTTP(S) or local source at an offset (resuming),
its response headers, and the errors that say whether another attempt can help."""

from __future__ import annotations

import http.client
import io
import logging
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from marginmine import __version__

log = logging.getLogger(__name__)


USER_AGENT = f"marginmine/{__version__} (python-urllib)"

_RETRY_STATUS = frozenset({408, 429})
SCHEMES = frozenset({"http", "https", "file"})
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_UNSATISFIED_RANGE = re.compile(r"bytes\s+\*/(\d+)")


class Retryable(Exception):
    """A transient failure: the next attempt resumes from the part file."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class Fatal(Exception):
    """A failure that retrying cannot fix."""

    def __init__(self, message: str, advice: str | None = None):
        super().__init__(message)
        self.advice = advice


class Stream(Protocol):
    def read1(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


@dataclass
class Body:
    """An open source: ``stream`` yields the bytes from offset ``start`` on."""

    stream: Stream
    start: int
    size: int | None  # full size of the file, when known


# --- opening sources -----------------------------------------------------------


def open_source(url: str, offset: int, timeout: float) -> Body:
    local = _local_path(url)
    if local is not None:
        return _open_local(local, offset)
    return _open_http(url, offset, timeout)


def is_drive_letter(scheme: str) -> bool:
    return os.name == "nt" and len(scheme) == 1


def _local_path(url: str) -> Path | None:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return Path(urllib.request.url2pathname(parts.path))
    if not scheme or is_drive_letter(scheme):
        return Path(url)
    return None


def _open_local(path: Path, offset: int) -> Body:
    try:
        handle = open(path, "rb")
    except FileNotFoundError as exc:
        raise Fatal(f"no such file: {path}") from exc
    except OSError as exc:
        raise Fatal(f"cannot read {path}: {exc.strerror or exc}") from exc
    size = os.fstat(handle.fileno()).st_size
    start = offset if offset <= size else 0
    handle.seek(start)
    return Body(handle, start, size)


def _open_http(url: str, offset: int, timeout: float) -> Body:
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
            raise Fatal(f"invalid URL: {exc}") from exc
        raise Retryable(describe_error(exc)) from exc
    return _http_body(response, url, offset, timeout)


def _http_body(
    response: http.client.HTTPResponse, url: str, offset: int, timeout: float
) -> Body:
    status = response.status
    if status == 200:
        return Body(response, 0, _int_header(response.headers, "Content-Length"))
    if status == 206:
        parsed = _parse_content_range(response.headers.get("Content-Range"))
        if parsed is not None and parsed[0] == offset:
            return Body(response, offset, parsed[1])
        response.close()
        log.warning("%s: unusable Content-Range for a resume at byte %d", url, offset)
        return _open_http(url, 0, timeout)
    response.close()
    raise Fatal(f"unexpected HTTP status {status} {response.reason}")


def _http_error(exc: urllib.error.HTTPError, url: str, offset: int, timeout: float) -> Body:
    headers = exc.headers if exc.headers is not None else Message()
    message = f"HTTP {exc.code} {exc.reason}"
    exc.close()
    if exc.code == 416 and offset:
        return _range_not_satisfiable(headers.get("Content-Range"), url, offset, timeout)
    if exc.code >= 500 or exc.code in _RETRY_STATUS:
        raise Retryable(message, _retry_after(headers))
    raise Fatal(message)


def _range_not_satisfiable(
    content_range: str | None, url: str, offset: int, timeout: float
) -> Body:
    """HTTP 416: the part file is complete if it has the remote size, else restart."""
    match = _UNSATISFIED_RANGE.fullmatch((content_range or "").strip())
    remote = int(match.group(1)) if match else None
    if remote == offset:
        log.info("%s: part file already complete (%d bytes)", url, offset)
        return Body(io.BytesIO(b""), offset, offset)
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


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        reason = exc.reason
        if isinstance(reason, BaseException):
            return f"{type(reason).__name__}: {reason}"
        return str(reason)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
