"""Outputs that never overwrite an input, appear only when complete, and are byte-deterministic.

The contract every command keeps (the CLI checks it before any work starts):

* **No output over an input.** :func:`check_paths` resolves links (``realpath``; hard links by
  inode) and refuses, naming both paths, when an output is an input, when two outputs are the same
  file (counting files a command derives from its outputs, like the ``.tsv`` written beside a ledger), when an
  output is an existing file inside an input directory, or when an input lies inside an output
  directory the command fills.
* **Complete or absent.** :class:`AtomicWriter` and :func:`write_text` write to a hidden temporary
  name beside the target and rename it when the writer closes without an error; a crash or a kill
  leaves the old file (or none), never a torn one. Temporary names carry the process id, so two
  runs never write into each other's temporary file; :func:`temporary` names them.
* **Byte-deterministic compression.** ``.gz`` outputs carry no file name and a zero time stamp in
  the gzip header, so the same content gives the same SHA-256 on every run.
"""

from __future__ import annotations

import gzip
import io
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Iterable, Iterator, Sequence

from marginmine.errors import InputError

#: gzip level of every ``.gz`` output (speed over size: shards are rewritten often)
GZIP_LEVEL = 3


def temporary(path: str | Path) -> Path:
    """The hidden temporary name of ``path`` for this process; keeps the suffix (``.gz`` decides
    compression)."""
    p = Path(path)
    return p.with_name(f".{p.name}.tmp{os.getpid()}{p.suffix}")


def gzip_writer(raw: IO[bytes], level: int = GZIP_LEVEL) -> gzip.GzipFile:
    """A gzip stream over ``raw`` with a reproducible header (no name, mtime 0)."""
    return gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level, mtime=0)


class AtomicWriter:
    """A UTF-8 text file (gzip if the target ends with ``.gz``) written under a temporary name.

    ``close()`` (or leaving a ``with`` block normally) renames it into place; leaving a ``with``
    block by an exception, or :meth:`abort`, removes it and leaves the target untouched.
    """

    #: characters buffered before they go to the (gzip) stream in one write
    BUFFER = 1 << 16

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = temporary(self.path)
        self._raw: IO[bytes] = open(self.tmp, "wb")
        # no TextIOWrapper: its flush on close would add a gzip sync block, so the bytes would
        # depend on how the file was written, not only on what was written
        self._out: IO[bytes] = gzip_writer(self._raw) if self.path.suffix == ".gz" else self._raw
        self._buf: list[str] = []
        self._size = 0
        self.closed = False

    def write(self, text: str) -> int:
        self._buf.append(text)
        self._size += len(text)
        if self._size >= self.BUFFER:
            self._drain()
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def _drain(self) -> None:
        if self._buf:
            self._out.write("".join(self._buf).encode("utf-8"))
            self._buf, self._size = [], 0

    def _close_streams(self, keep: bool) -> None:
        try:
            if keep:
                self._drain()
            self._out.close()  # a gzip stream does not close a passed file object
        finally:
            self._raw.close()

    def close(self) -> None:
        """Finish and rename into place (once)."""
        if self.closed:
            return
        self._close_streams(keep=True)
        os.replace(self.tmp, self.path)
        self.closed = True

    def abort(self) -> None:
        """Drop what was written; the target keeps its old content (or stays absent)."""
        if self.closed:
            return
        try:
            self._close_streams(keep=False)
        finally:
            self.tmp.unlink(missing_ok=True)
            self.closed = True

    def __enter__(self) -> "AtomicWriter":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write ``path``'s content to (e.g. by a library's ``save(...)``);
    renamed into place when the block ends normally, removed when it raises."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary(p)
    try:
        yield tmp
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: str | Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` atomically (parents created)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary(p)
    try:
        tmp.write_bytes(payload)
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically; ``.gz`` targets are compressed reproducibly."""
    payload = text.encode("utf-8")
    if Path(path).suffix == ".gz":
        buf = io.BytesIO()
        with gzip_writer(buf) as gz:
            gz.write(payload)
        payload = buf.getvalue()
    write_bytes(path, payload)


# --- inputs vs outputs --------------------------------------------------------------------


@dataclass(frozen=True)
class Role:
    """One path of a command: its flag (for messages), the path, and whether it is a directory."""

    flag: str
    path: Path
    directory: bool = False

    @property
    def real(self) -> str:
        return os.path.realpath(self.path)


def _same(a: Role, b: Role) -> bool:
    if a.real == b.real:
        return True
    try:  # hard links (and bind mounts): same inode
        return os.path.samefile(a.path, b.path)
    except OSError:
        return False


def _inside(child: Role, parent: Role) -> bool:
    return os.path.commonpath([child.real, parent.real]) == parent.real and child.real != parent.real


def _name(role: Role) -> str:
    return f"{role.flag} {role.path}"


def check_paths(inputs: Iterable[Role], outputs: Iterable[Role], *, where: str = "") -> None:
    """Refuse (``InputError`` naming both paths) when an output would overwrite an input or
    another output; see the module docstring for the cases."""
    ins: Sequence[Role] = list(inputs)
    outs: Sequence[Role] = list(outputs)
    hint = "choose another output path; marginmine never writes over its own input"
    for o in outs:
        for i in ins:
            if _same(o, i):
                raise InputError(str(o.path), f"{where}output {_name(o)} is the input {_name(i)}", hint=hint)
            if i.directory and not o.directory and _inside(o, i) and o.path.exists():
                raise InputError(str(o.path), f"{where}output {_name(o)} is a file of the input directory "
                                              f"{_name(i)}", hint=hint)
            if o.directory and _inside(i, o):
                raise InputError(str(i.path), f"{where}input {_name(i)} lies inside the output directory "
                                              f"{_name(o)}", hint="move the input or choose another directory")
    for n, a in enumerate(outs):
        for b in outs[n + 1:]:
            if _same(a, b):
                raise InputError(str(a.path), f"{where}outputs {_name(a)} and {_name(b)} are the same file",
                                 hint="give each output its own path")


def sha256_file(path: str | Path) -> str:
    """SHA-256 of the bytes on disk (a .gz is hashed as stored, not decompressed)."""
    import hashlib

    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except FileNotFoundError as exc:
        raise InputError(str(path), "file not found", hint="check the path") from exc
    return h.hexdigest()


def json_fingerprint(obj: object) -> str:
    """SHA-256 of ``obj`` as sorted-key JSON: what resumable steps compare their settings by."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def read_json(path: str | Path, what: str, hint: str = "rerun the step that writes it"):
    """The JSON in ``path``; a missing, unreadable or malformed file is an InputError naming it
    (``what``: which input it is, e.g. ``--first``)."""
    import json

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(p), f"cannot read {what}: no such file", hint=hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(p), f"cannot read {what} ({exc})", hint=hint) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(str(p), f"{what}: not JSON ({exc.msg})", line=exc.lineno, hint=hint) from None
