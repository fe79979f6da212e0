"""Exact duplicate detection with bounded memory.

Keys (16-byte digests, see :func:`marginmine.preprocess.normalize.pair_key`) are streamed in. While they fit
the memory budget they stay in RAM; beyond it they spill into 256 partition files by their first
byte, each of which is deduplicated on its own. Either way the first occurrence of every key is
kept and every later one is marked, so the result does not depend on the budget.

The output is a duplicate mask (one byte per input line), in RAM or as a memory-mapped file.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Iterable

import numpy as np

log = logging.getLogger(__name__)

#: one record: the key as two big-endian uint64 and the 0-based input index
RECORD = np.dtype([("hi", ">u8"), ("lo", ">u8"), ("idx", "<u8")])
_CHUNK = 1 << 18


def first_occurrence_dups(records: np.ndarray) -> np.ndarray:
    """Indices (``idx`` field) of every record whose key appeared at a smaller index."""
    if len(records) == 0:
        return np.empty(0, dtype=np.uint64)
    order = np.lexsort((records["idx"], records["lo"], records["hi"]))
    s = records[order]
    same = (s["hi"][1:] == s["hi"][:-1]) & (s["lo"][1:] == s["lo"][:-1])
    return s["idx"][1:][same].astype(np.uint64)


def _to_records(keys: list[bytes], start: int) -> np.ndarray:
    rec = np.empty(len(keys), dtype=RECORD)
    raw = np.frombuffer(b"".join(keys), dtype=">u8").reshape(-1, 2)
    rec["hi"] = raw[:, 0]
    rec["lo"] = raw[:, 1]
    rec["idx"] = np.arange(start, start + len(keys), dtype=np.uint64)
    return rec


class DuplicateFinder:
    """Collect keys in input order, then :meth:`mask` says which lines repeat an earlier one."""

    def __init__(self, mem_budget_bytes: int = 1 << 30, workdir: str | Path | None = None):
        self.max_in_memory = max(_CHUNK, mem_budget_bytes // RECORD.itemsize)
        self._workdir = workdir
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._chunks: list[np.ndarray] = []
        self._pending: list[bytes] = []
        self._parts: list[Path] = []
        self.n = 0

    def add(self, key: bytes) -> None:
        self._pending.append(key)
        if len(self._pending) >= _CHUNK:
            self._flush()

    def add_many(self, keys: Iterable[bytes]) -> None:
        for k in keys:
            self.add(k)

    def _flush(self) -> None:
        if not self._pending:
            return
        rec = _to_records(self._pending, self.n)
        self.n += len(self._pending)
        self._pending = []
        self._chunks.append(rec)
        if self._parts or self.n > self.max_in_memory:
            self._spill()

    def _spill(self) -> None:
        if not self._parts:
            self._tmp = tempfile.TemporaryDirectory(prefix="mm-dedup-", dir=self._workdir)
            self._parts = [Path(self._tmp.name) / f"part{i:03d}.bin" for i in range(256)]
            log.info("dedup: %d keys exceed the memory budget, spilling to %s", self.n, self._tmp.name)
        for rec in self._chunks:
            bucket = (rec["hi"] >> np.uint64(56)).astype(np.int64)
            order = np.argsort(bucket, kind="stable")
            rec, bucket = rec[order], bucket[order]
            bounds = np.searchsorted(bucket, np.arange(257))
            for b in np.flatnonzero(np.diff(bounds)):
                with open(self._parts[b], "ab") as fh:
                    rec[bounds[b]:bounds[b + 1]].tofile(fh)
        self._chunks = []

    def mask(self, out_path: str | Path | None = None) -> np.ndarray:
        """Duplicate mask (``uint8``, 1 = repeats an earlier line); memory-mapped if ``out_path``."""
        self._flush()
        if out_path is None:
            mask = np.zeros(self.n, dtype=np.uint8)
        else:
            mask = np.lib.format.open_memmap(out_path, mode="w+", dtype=np.uint8, shape=(self.n,))
        if self._parts:
            for part in self._parts:
                if part.exists():
                    mask[first_occurrence_dups(np.fromfile(part, dtype=RECORD)).astype(np.int64)] = 1
            self.close()
        elif self._chunks:
            mask[first_occurrence_dups(np.concatenate(self._chunks)).astype(np.int64)] = 1
            self._chunks = []
        return mask

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
