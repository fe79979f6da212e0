"""Errors the CLI reports as one clear line (no traceback)."""

from __future__ import annotations


class MarginmineError(Exception):
    """Base class: the message says what went wrong and what to do."""


class InputError(MarginmineError):
    """Bad input data: names the file, the line (1-based) where known, and a remedy."""

    def __init__(self, path: str, message: str, line: int | None = None, hint: str | None = None):
        self.path = str(path)
        self.line = line
        self.hint = hint
        where = f"{self.path}:{line}" if line is not None else self.path
        text = f"{where}: {message}"
        if hint:
            text += f" ({hint})"
        super().__init__(text)


class DownloadError(MarginmineError):
    """A download failed after all retries, or its checksum did not match."""


class NotImplementedYet(MarginmineError):
    """A planned stage of the workflow that a later issue implements."""
