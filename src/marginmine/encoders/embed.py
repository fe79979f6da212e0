"""Embedding a text file (or one column of a TSV shard) into a memory-mapped ``.npy``.

Long jobs never die silently and never start over: rows are written in chunks into
``OUTPUT.part.npy`` (plain positioned writes into a pre-sized ``.npy``, so RAM stays flat
whatever the file size; readers memory-map the result), a small state file
records how many rows are complete, and a rerun after a kill continues from the last complete
chunk. The finished file is renamed into place only when every line is embedded, so the presence
of OUTPUT means "complete" (what Snakemake relies on).
"""

from __future__ import annotations

import json
import logging
import os
import time
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from marginmine.encoders.base import SentenceEncoder
from marginmine.errors import InputError
from marginmine.io.resume import Resumable
from marginmine.io.safe import write_text
from marginmine.io.text import count_lines, iter_sentences

log = logging.getLogger(__name__)


def provenance_path(output: str | Path) -> Path:
    """Where :func:`embed_file` records what wrote ``output``: ``<output>.json`` (the encoder's
    identity, the input, its column and language, the rows)."""
    out = Path(output)
    return out.with_name(out.name + ".json")


def embedded_by(embeddings: str | Path) -> str | None:
    """The identity (:func:`marginmine.encoders.base.encoder_identity`) of the encoder that wrote
    ``embeddings``, or None when nothing records it (embeddings made elsewhere)."""
    p = provenance_path(embeddings)
    if not p.is_file():
        return None
    try:
        record = json.loads(p.read_text(encoding="utf-8"))
        identity, rows, dim = str(record["encoder"]), int(record["rows"]), int(record["dim"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(str(p), f"cannot read the embeddings' record ({exc})",
                         hint="embed the file again (marginmine embed)") from exc
    shape = np.load(embeddings, mmap_mode="r").shape
    if shape != (rows, dim):  # a record left beside embeddings written otherwise
        log.warning("%s: records %d x %d embeddings, the file holds %s: not its record", p, rows, dim, shape)
        return None
    return identity or None


def embeddings_identity(paths: Sequence[str | Path]) -> str | None:
    """The one encoder that wrote every embeddings file in ``paths`` (their records), None when none
    records it; files written by two encoders are an error."""
    found = [(str(p), embedded_by(p)) for p in paths]
    known = [(p, i) for p, i in found if i]
    if known and len(known) < len(found):
        log.warning("no record of the encoder that wrote %s: only %s can be checked against fitted heads",
                    ", ".join(p for p, i in found if not i), ", ".join(p for p, _ in known))
    for p, i in known[1:]:
        if i != known[0][1]:
            raise InputError(p, f"was embedded by another encoder ({i[:12]}) than {known[0][0]} ({known[0][1][:12]})",
                             hint="embed every side (and translation) with the same encoder")
    return known[0][1] if known else None


def _finish(job: Resumable, record: dict[str, object]) -> None:
    """The record first, then the embeddings in place: a present output always has its record."""
    write_text(provenance_path(job.out), json.dumps(record, indent=1) + "\n")
    job.finish()


def embed_file(encoder: SentenceEncoder, lang: str, input_path: str | Path, output: str | Path, *,
               column: int | None = None, dtype: str = "float16", chunk_size: int = 50_000,
               encoder_id: str = "", log_every: float = 10.0, allow_empty: bool = False) -> Path:
    """Embed every line of ``input_path`` into ``output`` (``.npy``, L2-normalised rows).

    An empty input is an error unless ``allow_empty`` (an empty shard): then ``output`` holds
    0 rows of ``encoder.dim`` columns. ``encoder_id`` (the encoder's identity) is recorded beside
    the output (:func:`provenance_path`), so that a head fitted on another encoder is refused."""
    src, out = Path(input_path), Path(output)
    n = count_lines(src)
    record = {"encoder": encoder_id, "input": str(src), "column": column, "lang": lang, "rows": n,
              "dim": encoder.dim, "dtype": dtype}
    provenance_path(out).unlink(missing_ok=True)  # an earlier output's record goes with it
    st = src.stat()
    job = Resumable(out, {"input": str(src), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "column": column,
                          "lang": lang, "encoder": encoder_id}, "embedding", log, keep=".npy")
    if n == 0:
        if not allow_empty:
            raise InputError(str(src), "is empty: nothing to embed", hint="check the previous step's output")
        log.warning("%s is empty: writing %s with 0 rows", src, out)
        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(job.part, np.empty((0, encoder.dim), dtype=np.dtype(dtype)))
        _finish(job, record)
        return out
    state = job.resume("input or encoder", partial(_torn, job.part, n, encoder.dim, dtype))
    if state:
        done = int(state["done"])
        log.info("resuming %s at line %d of %d", out, done, n)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        done = 0
        # header + full size now; rows are written in place below
        np.lib.format.open_memmap(job.part, mode="w+", dtype=np.dtype(dtype), shape=(n, encoder.dim)).flush()
        job.save(rows=n, dtype=dtype, done=0)
    progress = partial(job.save, rows=n, dtype=dtype)
    sink = _RowWriter(job.part, np.dtype(dtype), encoder.dim)
    t0 = last = time.monotonic()
    start_done = done
    batch: list[str] = []
    for text in iter_sentences(src, column, start=done):
        batch.append(text)
        if len(batch) == chunk_size:
            done = _write_chunk(encoder, lang, batch, sink, done, progress)
            batch = []
            now = time.monotonic()
            if now - last >= log_every:
                last = now
                log.info("%s: %d/%d sentences, %.0f sentences/s", out.name, done, n,
                         (done - start_done) / (now - t0))
    if batch:
        done = _write_chunk(encoder, lang, batch, sink, done, progress)
    sink.close()
    if done != n:
        raise InputError(str(src), f"changed while embedding: expected {n} lines, read {done}",
                         hint="rerun; the partial output will be discarded")
    _finish(job, record)
    dt = time.monotonic() - t0
    log.info("%s: %d sentences in %.1f s (%.0f sentences/s)", out, n - start_done, dt, (n - start_done) / max(dt, 1e-9))
    return out


def _torn(part: Path, n: int, dim: int, dtype: str, state: dict) -> str | None:
    """Why ``part`` is not what ``state`` promises (a readable ``.npy`` of ``n`` x ``dim`` ``dtype``
    rows with every byte on disk), or None when it is."""
    torn = f"{part.name} is not the size its header promises (torn)"
    if (state.get("rows"), state.get("dtype")) != (n, dtype):
        return torn
    try:
        with open(part, "rb") as fh:
            major, _ = np.lib.format.read_magic(fh)
            shape, _, found = (np.lib.format.read_array_header_1_0 if major == 1
                               else np.lib.format.read_array_header_2_0)(fh)
            offset = fh.tell()
    except (OSError, ValueError):
        return torn
    dt = np.dtype(dtype)
    whole = shape == (n, dim) and found == dt and part.stat().st_size == offset + n * dim * dt.itemsize
    return None if whole else torn


class _RowWriter:
    """Positioned writes of rows into an existing ``.npy`` (no mapping: resident memory stays flat)."""

    def __init__(self, path: Path, dtype: np.dtype, dim: int):
        with open(path, "rb") as fh:
            major, _ = np.lib.format.read_magic(fh)
            (np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0)(fh)
            self.offset = fh.tell()
        self.fh = open(path, "r+b")
        self.dtype, self.row_bytes = dtype, dtype.itemsize * dim

    def write(self, start: int, rows: np.ndarray) -> None:
        self.fh.seek(self.offset + start * self.row_bytes)
        self.fh.write(np.ascontiguousarray(rows, dtype=self.dtype).tobytes())
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def close(self) -> None:
        self.fh.close()


def _write_chunk(encoder: SentenceEncoder, lang: str, batch: list[str], sink: _RowWriter, done: int,
                 progress: Callable[..., None]) -> int:
    """Embed ``batch`` into rows ``done ..`` of ``sink``; its rows on disk, ``progress(done=...)``
    records them (the state file)."""
    emb = encoder.encode(batch, lang)
    if emb.shape != (len(batch), encoder.dim):
        raise RuntimeError(f"encoder returned shape {emb.shape} for {len(batch)} sentences")
    sink.write(done, emb)
    done += len(batch)
    progress(done=done)
    return done
