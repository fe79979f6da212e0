"""What the pre-trained encoder kinds share: the user's files become an encoder directory.

A pre-trained kind's ``train`` trains nothing: it checks each file the config names against the
SHA-256 the config pins for it, links (or copies) the files into the encoder directory and writes
the manifest (:func:`marginmine.encoders.base.write_manifest`), so ``load_encoder`` verifies the
copies like any encoder of ours before a loader reads them. A file without a pin, or whose digest
differs from its pin, is refused before anything reads it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable

from marginmine.encoders.base import EncoderError
from marginmine.io.safe import sha256_file

HEX = set("0123456789abcdef")


def check_keys(kind: str, params: dict[str, Any], known: Iterable[str]) -> None:
    unknown = sorted(set(params) - set(known) - {"threads"})
    if unknown:
        raise EncoderError(f"{kind} params: unknown key(s) {unknown} (known: {', '.join(sorted(known))})")


def local_file(kind: str, key: str, value: Any) -> Path:
    """The param ``key`` (e.g. ``params.model``): an existing local file. The workflow has read a
    relative path under data_dir already (marginmine.encoders.INPUT_PATHS); called directly, a
    relative path is relative to the working directory."""
    if not isinstance(value, str) or not value:
        raise EncoderError(f"{kind} {key}: give the local path of the file (got {value!r})")
    p = Path(value).expanduser()
    if not p.is_file():
        raise EncoderError(f"{kind} {key}: {p} not found (relative paths in a config are read under data_dir; "
                           "download it first: docs/encoders.md lists the public URLs and their SHA-256)")
    return p


def pinned(kind: str, key: str, path: Path, pins: dict[str, Any], where: str = "params.",
           digest: Callable[[Path], str] = sha256_file) -> str:
    """The file's SHA-256 (by ``digest``: the workflow's plan passes one that remembers the digests of
    files it has read), which must equal ``pins[key]`` (the config's ``<where>sha256.<key>``)."""
    want = pins.get(key)
    if want is None:
        raise EncoderError(f"{kind} {where}sha256.{key}: no SHA-256 pinned for {path}; pin it "
                           f"(`sha256sum {path}`) - pre-trained files are loaded only when the config pins "
                           "their digest")
    if not isinstance(want, str) or len(want) != 64 or set(want.lower()) - HEX:
        raise EncoderError(f"{kind} {where}sha256.{key}: {want!r} is not a SHA-256 (64 hex digits); pin the "
                           f"file's (`sha256sum {path}`) once you trust its source")
    got = digest(path)
    if got != want.lower():
        raise EncoderError(f"{path}: SHA-256 {got} differs from {where}sha256.{key} {want.lower()} "
                           "(a different release, a partial download or a modified file); refusing to load it")
    return got


def place(src: Path, dest: Path) -> None:
    """``dest`` becomes ``src``'s content: a hard link when possible, else a copy (never a write into src)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists() and os.path.samefile(src, dest):
        return
    tmp = dest.with_name(dest.name + ".part")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
    os.replace(tmp, dest)
