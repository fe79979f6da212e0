"""Filtering mode: scores for a given list of pairs (the paper's ParaCrawl experiment).

The pairs are cut into batches of ``batch_size`` consecutive lines (paper: 5M); within a batch
the distinct source sentences are searched against the distinct target sentences and back, and
every pair gets one score per configured scorer (a named score kind, :mod:`marginmine.scoring`),
six decimals. The output is self-describing: a header line names the columns (the scorer names),
then one line per input line, same order. Readers find a column by name
(:func:`read_scores`) and refuse files without the header.

Batches depend only on their own lines, so a file scored in one job and the same file cut into
batch-sized pieces scored as separate jobs give byte-identical lines after the header (tested).

A *noise baseline* (``baseline=``) is written beside the scores: each batch re-paired at random
(:meth:`marginmine.scoring.kinds.Batch.repaired`, seeded by the run's seed and the batch's first
line) and scored by every scorer against the batch's own neighbourhoods, one line per re-paired
pair in the same columns; re-paired lines that repeated sentences make pairs of the batch again are
left out (the log counts them), as is a batch of one pair. The scores file does not change with it.
Long runs log pairs/s, write each finished batch (a gzip member of its own for ``.gz``) and resume
after a kill from the last complete batch; within a batch, each kNN search keeps its finished query
blocks in ``OUTPUT.knn/`` (removed when the file is done), so a kill inside a 5M-pair batch loses
at most the block being searched.
"""

from __future__ import annotations

import gzip
import logging
import os
import shutil
import time
from dataclasses import asdict, dataclass
from functools import partial
from itertools import zip_longest
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from marginmine.defaults import BATCH_SIZE, INDEX, SEED
from marginmine.errors import InputError
from marginmine.io.resume import Resumable, part_path
from marginmine.io.text import MAX_LINE_BYTES, iter_raw_lines, iter_sentences, open_binary
from marginmine.scoring import NAME, Batch, ScoreKind, describe
from marginmine.scoring.embeddings import ArrayEmbeddings, Embeddings, EncoderEmbeddings, gather_rows  # noqa: F401 (re-exported)
from marginmine.search.knn import IndexSpec, first_nonfinite_row
from marginmine.search.margin import text_digests, unique_groups

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoreSettings:
    """What a score file holds: ``scorers`` as ``(name, kind)`` in column order, scored in batches
    of ``batch_size`` pairs with kNN ``index``. The defaults here are the CLI's; the workflow's
    come from config/schema.yaml (a test checks they agree)."""

    scorers: tuple[tuple[str, ScoreKind], ...]
    batch_size: int = BATCH_SIZE
    index: IndexSpec = IndexSpec(kind=INDEX)

    def __post_init__(self) -> None:
        names = [n for n, _ in self.scorers]
        if not names:
            raise ValueError("no scorer given")
        bad = [n for n in names if not NAME.fullmatch(n)]
        if bad or len(set(names)) != len(names):
            raise ValueError(f"scorer names must be distinct and match {NAME.pattern}: {names}")
        if self.batch_size < 1:
            raise ValueError("batch_size must be positive")

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.scorers]

    def describe(self) -> dict[str, object]:
        """JSON-able: the scorers with their kinds and params, batch size and index."""
        return {"scorers": {n: describe(n, k) for n, k in self.scorers}, "batch_size": self.batch_size,
                "index": asdict(self.index)}


def iter_pairs(paths: Sequence[str], columns: tuple[int, int] = (0, 1)) -> Iterator[tuple[str, str]]:
    """``(src, tgt)`` of every line: one TSV (``columns``) or two line-aligned files. Nothing is
    skipped; a line without the columns, or files of different length, is an error."""
    if len(paths) == 1:
        path = str(paths[0])
        for n, text in enumerate(iter_sentences(path), 1):
            cols = text.split("\t")
            if max(columns) >= len(cols):
                raise InputError(path, f"has {len(cols)} column(s), needs columns {columns[0]},{columns[1]}",
                                 line=n, hint="give a TSV with source and target, or two aligned files")
            yield cols[columns[0]], cols[columns[1]]
        return
    if len(paths) != 2:
        raise InputError(", ".join(map(str, paths)), "expected one TSV or two line-aligned files")
    a, b = (str(p) for p in paths)
    n = 0
    for n, (s, t) in enumerate(zip_longest(iter_sentences(a), iter_sentences(b)), 1):
        if s is None or t is None:
            longer, other = (b, a) if s is None else (a, b)
            raise InputError(longer, f"has more lines than {other} (which ends after line {n - 1})",
                             hint="the two files must be line-aligned")
        yield s, t


def make_batch(src: Sequence[str] | np.ndarray, tgt: Sequence[str] | np.ndarray, start: int,
               emb: Embeddings, settings: ScoreSettings, scratch: Path | None = None) -> Batch:
    """One batch of pairs (lines ``start ..`` of the input; the texts, or their digests when ``emb``
    needs no texts) with its distinct sentences' embeddings; ``scratch``: where its kNN searches
    keep their finished blocks (:class:`marginmine.search.blocks.BlockStore`)."""
    fx, gx = unique_groups(src)
    fy, gy = unique_groups(tgt)
    xu = emb.unique_rows(start, src, fx, "src")
    yu = emb.unique_rows(start, tgt, fy, "tgt")
    def translated(side: str) -> np.ndarray:  # the translations' rows, asked for by vote kinds only
        return emb.translated_rows(start, src if side == "src" else tgt, fx if side == "src" else fy, side)  # type: ignore[attr-defined]

    has_translations = getattr(emb, "translated", None) is not None
    return Batch(src, tgt, xu, yu, gx, gy, settings.index, translated if has_translations else None, scratch)


def score_kinds(batch: Batch, settings: ScoreSettings) -> dict[str, np.ndarray]:
    """Every scorer's scores of ``batch``, one per pair."""
    out = {}
    for name, kind in settings.scorers:
        values = np.asarray(kind.score(batch))
        if values.shape != (len(batch),):
            raise ValueError(f"scorer {name} ({type(kind).__name__}) returned shape {values.shape} for a batch of "
                             f"{len(batch)} pairs: a score kind must return one score per pair")
        out[name] = values
    return out


def score_batch(src: Sequence[str] | np.ndarray, tgt: Sequence[str] | np.ndarray, start: int,
                emb: Embeddings, settings: ScoreSettings, scratch: Path | None = None) -> dict[str, np.ndarray]:
    """Every scorer's scores of one batch of pairs (:func:`make_batch`, :func:`score_kinds`)."""
    return score_kinds(make_batch(src, tgt, start, emb, settings, scratch), settings)


def header_line(names: Sequence[str]) -> bytes:
    """The first line of a score file: its column names."""
    return ("\t".join(names) + "\n").encode()


def format_scores(scores: dict[str, np.ndarray], names: Sequence[str]) -> bytes:
    cols = [scores[m] for m in names]
    lines = ["\t".join(f"{v:.6f}" for v in row) for row in zip(*(c.tolist() for c in cols))]
    return ("\n".join(lines) + "\n").encode() if lines else b""


def _batches(pairs: Iterator[tuple[str, str]], size: int) -> Iterator[tuple[list[str], list[str]]]:
    src: list[str] = []
    tgt: list[str] = []
    for s, t in pairs:
        src.append(s)
        tgt.append(t)
        if len(src) == size:
            yield src, tgt
            src, tgt = [], []
    if src:
        yield src, tgt


def _digest_batches(pairs: Iterator[tuple[str, str]], size: int,
                    chunk: int = 65_536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """:func:`_batches` with each text replaced by its digest (:func:`text_digests`), taken
    ``chunk`` lines at a time: a 5M-pair batch holds 160 MB of keys instead of its texts (about
    2 GB as Python strings)."""
    src: list[np.ndarray] = []
    tgt: list[np.ndarray] = []
    held = 0
    for part_src, part_tgt in _batches(pairs, chunk):
        a = 0
        while a < len(part_src):  # a chunk may end one batch and begin the next
            take = min(len(part_src) - a, size - held)
            src.append(text_digests(part_src[a:a + take]))
            tgt.append(text_digests(part_tgt[a:a + take]))
            held, a = held + take, a + take
            if held == size:
                yield np.concatenate(src), np.concatenate(tgt)
                src, tgt, held = [], [], 0
    if held:
        yield np.concatenate(src), np.concatenate(tgt)


def _check_finite_scores(scores: dict[str, np.ndarray], start: int, path: str, what: str = "this pair") -> None:
    for name, values in scores.items():
        bad = first_nonfinite_row(values)
        if bad is not None:
            raise InputError(path, f"the {name} score of {what} is {values[bad]} (not a finite number)",
                             line=start + bad + 1,
                             hint="its embeddings are degenerate (e.g. zero vectors): check the encoder")


def _baseline_data(batch: Batch, settings: ScoreSettings, seed: int, start: int,
                   path: str) -> tuple[bytes, int, int]:
    """The formatted noise-baseline lines of ``batch`` (module docstring), how many, and how many
    re-paired lines were left out as original pairs."""
    if len(batch) < 2:
        return b"", 0, 0
    noise = batch.repaired((seed, start))
    scores = score_kinds(noise, settings)
    _check_finite_scores(scores, start, path, "this line's source re-paired for the noise baseline")
    keep = ~noise.original_pairs()
    return (format_scores({n: v[keep] for n, v in scores.items()}, settings.names), int(keep.sum()),
            int((~keep).sum()))


def _short_part(parts: Sequence[tuple[Path | None, str]], state: dict) -> str | None:
    """The first part that holds less than the bytes the state records for it (``state[key]``; a
    lost write), or None."""
    for p, key in parts:
        if p is not None and (not p.exists() or p.stat().st_size < int(state[key])):
            return f"{p.name} holds less than its state's {int(state[key])} bytes"
    return None


def score_file(inputs: Sequence[str], output: str | Path, emb: Embeddings, settings: ScoreSettings,
               columns: tuple[int, int] = (0, 1), fingerprint: dict[str, object] | None = None,
               allow_empty: bool = False, baseline: str | Path | None = None, baseline_seed: int = SEED) -> int:
    """Score every pair of ``inputs`` into ``output``; returns the number of pairs. Resumes from
    ``OUTPUT.part`` after an interruption when inputs and settings are unchanged. With ``baseline``,
    the noise baseline (module docstring, seeded by ``baseline_seed``) goes there in step with it.

    Embeddings with another row count than the input has lines are refused before any work, and
    NaN/inf embeddings or scores when met (naming the file and row/line). An empty input is an
    error unless ``allow_empty`` (an empty shard): then ``output`` is empty."""
    out = Path(output)
    noise = Path(baseline) if baseline is not None else None
    if noise is not None and noise.resolve() == out.resolve():
        raise InputError(str(noise), "is also the score file: give the baseline its own path")
    emb.check_input(str(inputs[0]))
    fp = {"inputs": [[str(p), os.stat(p).st_size, os.stat(p).st_mtime_ns] for p in inputs],
          "columns": list(columns), "settings": settings.describe(), **(fingerprint or {})}
    if noise is not None:
        fp["baseline"] = {"path": str(noise), "seed": int(baseline_seed)}
    job = Resumable(out, fp, "scoring", log, also=(noise,) if noise is not None else ())
    part, noise_part = job.part, part_path(noise) if noise is not None else None
    knn_dir = out.with_name(out.name + ".knn")  # the kNN searches' finished blocks (resume within a batch)
    sizes = ((part, "bytes"), (noise_part, "baseline_bytes"))  # each part and its size in the state
    state = job.resume("inputs or settings", partial(_short_part, sizes))
    if state:
        done_lines, done_bytes = int(state["lines"]), int(state["bytes"])
        noise_bytes = int(state.get("baseline_bytes", 0))
        for p, size in ((part, done_bytes), (noise_part, noise_bytes)):
            if p is not None:
                with open(p, "r+b") as fh:
                    fh.truncate(size)  # drops a batch written after the last state update
        log.info("resuming %s after %d scored pairs", out, done_lines)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        head = header_line(settings.names)
        for p, gz_head in ((part, out.suffix == ".gz"), (noise_part, noise is not None and noise.suffix == ".gz")):
            if p is not None:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(gzip.compress(head, compresslevel=3, mtime=0) if gz_head else head)
        done_lines, done_bytes = 0, part.stat().st_size
        noise_bytes = noise_part.stat().st_size if noise_part is not None else 0
        shutil.rmtree(knn_dir, ignore_errors=True)
        # the state from the start: a job killed inside its first batch keeps that batch's kNN blocks
        job.save(lines=0, bytes=done_bytes, baseline_bytes=noise_bytes)
    gz = out.suffix == ".gz"
    t0 = time.monotonic()
    line = noise_lines = left_out = 0
    with open(part, "ab") as fh, open(noise_part if noise_part is not None else os.devnull, "ab") as nh:
        # embeddings read from files and kinds that score vectors need no texts, only which lines
        # hold the same sentence; a kind that does not say texts = False gets them
        texts = getattr(emb, "needs_texts", True) or any(getattr(k, "texts", True) for _, k in settings.scorers)
        cut = _batches if texts else _digest_batches
        batches = cut(iter_pairs(inputs, columns), settings.batch_size)
        for src, tgt in batches:
            start, line = line, line + len(src)
            if line <= done_lines:
                continue
            batch = make_batch(src, tgt, start, emb, settings, knn_dir / f"batch{start:012d}")
            scores = score_kinds(batch, settings)
            _check_finite_scores(scores, start, str(inputs[0]))
            data = format_scores(scores, settings.names)
            fh.write(gzip.compress(data, compresslevel=3, mtime=0) if gz else data)
            fh.flush()
            os.fsync(fh.fileno())
            done_bytes = fh.tell()
            if noise is not None:
                noise_data, kept, dropped = _baseline_data(batch, settings, baseline_seed, start, str(inputs[0]))
                noise_lines, left_out = noise_lines + kept, left_out + dropped
                nh.write(gzip.compress(noise_data, compresslevel=3, mtime=0) if noise.suffix == ".gz" else noise_data)
                nh.flush()
                os.fsync(nh.fileno())
                noise_bytes = nh.tell()
            del batch
            job.save(lines=line, bytes=done_bytes, baseline_bytes=noise_bytes)
            shutil.rmtree(knn_dir / f"batch{start:012d}", ignore_errors=True)
            dt = time.monotonic() - t0
            log.info("%s: %d pairs scored (batch of %d), %.0f pairs/s", out.name, line, len(src),
                     (line - done_lines) / max(dt, 1e-9))
    if line == 0 and not allow_empty:
        raise InputError(", ".join(map(str, inputs)), "is empty: nothing to score",
                         hint="check the previous step's output")
    if line < done_lines:
        raise InputError(", ".join(map(str, inputs)), "is shorter than when scoring started", hint="rerun")
    if noise is not None:
        log.info("%s: noise baseline of %d re-paired pairs scored in this run (%d left out: they repeat a pair "
                 "of their batch; a batch of one pair has none)", noise.name, noise_lines, left_out)
    job.finish()
    shutil.rmtree(knn_dir, ignore_errors=True)
    return line


_HEADLESS_HINT = ("it was written before score files named their columns: delete it and re-run `marginmine score` "
                  "(in the workflow: remove work/<exp>/score/ and run snakemake again)")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_score_names(path: str | Path) -> list[str]:
    """The column names of a score file (its header line); a file without one is refused."""
    p = str(path)
    with open_binary(p) as fh:
        first = fh.readline()
    names = first.decode("utf-8", errors="replace").rstrip("\r\n").split("\t")
    if not first or all(_is_number(n) for n in names) or not all(NAME.fullmatch(n) for n in names):
        raise InputError(p, "has no header line naming its score columns", line=1, hint=_HEADLESS_HINT)
    return names


def read_scores(path: str | Path, name: str) -> np.ndarray:
    """The column named ``name`` of a score file as float64 (errors name the file and line)."""
    p = str(path)
    names = read_score_names(p)
    if name not in names:
        raise InputError(p, f"has no score column {name!r} (its columns: {', '.join(names)})",
                         hint="score with that scorer (config scorers:, or marginmine score --scorers)")
    column = names.index(name)
    values = []
    with open_binary(p) as fh:
        for n, (raw, _) in enumerate(iter_raw_lines(fh, MAX_LINE_BYTES, p), 1):
            if n == 1:
                continue
            cols = raw.split(b"\t")
            try:
                values.append(float(cols[column]))
            except (IndexError, ValueError) as exc:
                raise InputError(p, f"no number in column {column + 1} ({name})", line=n,
                                 hint="give a score file written by marginmine score") from exc
    out = np.asarray(values, dtype=np.float64)
    bad = first_nonfinite_row(out)
    if bad is not None:
        raise InputError(p, f"column {name} holds {out[bad]}, not a finite score", line=bad + 2,
                         hint="re-run marginmine score for this file (it refuses NaN/inf embeddings)")
    return out
