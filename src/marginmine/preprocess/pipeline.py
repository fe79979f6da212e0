"""The paper's corpus preprocessing, streaming, with a ledger that accounts for every pair.

Steps, in order (each pair is removed by the first step that rejects it):

``read``         defects of the input (see :mod:`marginmine.io.text`)
``dedup``        exact duplicate pairs after normalisation (first occurrence kept; two passes,
                 memory bounded by :class:`marginmine.preprocess.dedup.DuplicateFinder`)
``test_overlap`` a side occurs in a protected dev/test set (only if such sets are given)
``langid``       fastText language id of both sides
``length``       3-80 Moses tokens on both sides
``overlap``      >= 50% content-token overlap (untranslated copies)
``ratio``        length ratio > 2

Outputs: kept pairs (TSV: source, target, carried columns), rejects (TSV: line, step, reason,
source, target, carried columns), and the ledger (JSON + TSV).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from marginmine.defaults import LANGID_MIN_PROB, MAX_OVERLAP, MAX_RATIO, MAX_TOKENS, MIN_TOKENS, PREPROCESS_CACHE_MB
from marginmine.io.progress import Progress
from marginmine.io.safe import AtomicWriter
from marginmine.io.text import (
    DEFAULT_MAX_CHARS,
    Pair,
    ReadStats,
    format_tsv_line,
    open_binary,
    open_text_out,
    read_parallel,
    read_tsv,
)
from marginmine.preprocess.dedup import DuplicateFinder
from marginmine.preprocess.facts import FactCache, sentence_facts
from marginmine.preprocess.filters import (
    Candidate,
    Facts,
    LengthFilter,
    LengthRatioFilter,
    PairFilter,
    ProtectedSetFilter,
    TokenOverlapFilter,
    apply_filters,
)
from marginmine.preprocess.ledger import Ledger, length_bucket
from marginmine.preprocess.normalize import clean_text, pair_key

log = logging.getLogger(__name__)

STEPS = ("read", "dedup", "test_overlap", "langid", "length", "overlap", "ratio")


@dataclass
class PreprocessSettings:
    """Filter settings; defaults are the paper's."""

    src_lang: str
    tgt_lang: str
    min_tokens: int = MIN_TOKENS
    max_tokens: int = MAX_TOKENS
    max_overlap: float = MAX_OVERLAP
    max_ratio: float = MAX_RATIO
    langid: bool = True
    langid_min_prob: float = LANGID_MIN_PROB
    langid_model: str | None = None
    max_chars: int = DEFAULT_MAX_CHARS
    protected: frozenset[bytes] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens {self.min_tokens} > max_tokens {self.max_tokens}: no pair could be kept")

    def filters(self) -> list[PairFilter]:
        from marginmine.preprocess.langid import LangIdFilter

        out: list[PairFilter] = []
        if self.protected:
            out.append(ProtectedSetFilter(self.protected))
        if self.langid:
            out.append(LangIdFilter(self.langid_min_prob, self.langid_model))
        out += [LengthFilter(self.min_tokens, self.max_tokens), TokenOverlapFilter(self.max_overlap),
                LengthRatioFilter(self.max_ratio)]
        return out


@dataclass(frozen=True)
class InputSpec:
    """Where pairs come from: one TSV (with its source/target columns) or two aligned files."""

    paths: tuple[str, ...]
    columns: tuple[int, int] = (0, 1)

    def open(self, max_chars: int, stats: ReadStats) -> Iterator[Pair]:
        if len(self.paths) == 1:
            return read_tsv(self.paths[0], self.columns, max_chars, stats)
        return read_parallel(self.paths[0], self.paths[1], max_chars, stats)

    def is_empty(self) -> bool:
        """True if every input file has 0 bytes of content (e.g. an empty shard of ``split``)."""
        for path in self.paths:
            with open_binary(path) as fh:
                if fh.read(1):
                    return False
        return True

    def __str__(self) -> str:
        return " + ".join(self.paths)


# --- worker side: the facts of the sentences the main process has not seen -------------------

_WORKER_SETTINGS: PreprocessSettings | None = None

FactRow = tuple[bool | None, float | None, int | None, str | None]


def _init_worker(settings: PreprocessSettings) -> None:
    global _WORKER_SETTINGS
    _WORKER_SETTINGS = settings


def _facts_task(src_texts: list[str], tgt_texts: list[str]) -> tuple[list[FactRow], list[FactRow]]:
    s = _WORKER_SETTINGS
    assert s is not None
    return ([f.as_tuple() for f in sentence_facts(src_texts, s.src_lang, s)],
            [f.as_tuple() for f in sentence_facts(tgt_texts, s.tgt_lang, s)])


class _Done:
    """An in-process job's result, with the pool's ``get()``."""

    def __init__(self, value: tuple[list[FactRow], list[FactRow]]):
        self.value = value

    def get(self) -> tuple[list[FactRow], list[FactRow]]:
        return self.value


class _ChunkRunner:
    """Filter chunks in order. Each side of each pair is looked up in that side's
    :class:`~marginmine.preprocess.facts.FactCache` (``cache_bytes`` for both) and among the
    sentences being computed; the others go to the workers (in-process with 1 worker, else a
    bounded pool that never has more than ``2 * workers`` chunks in flight, so memory stays flat on
    any corpus size). The filters then run in this process on the facts, in the order of the
    chunks."""

    def __init__(self, settings: PreprocessSettings, workers: int, cache_bytes: int):
        self.workers = workers
        self.langs = (settings.src_lang, settings.tgt_lang)
        self.filters = settings.filters()
        self.caches = (FactCache(cache_bytes // 2), FactCache(cache_bytes // 2))
        self.inflight: tuple[dict[str, Facts], dict[str, Facts]] = ({}, {})
        self.looked = self.computed = 0
        if workers > 1:
            self.pool = mp.get_context("fork").Pool(workers, _init_worker, (settings,))
        else:
            _init_worker(settings)

    def _facts(self, side: int, text: str, asks: dict[str, Facts]) -> Facts:
        facts = self.caches[side].get(text)
        if facts is None:
            facts = self.inflight[side].get(text)
            if facts is None:
                facts = self.inflight[side][text] = asks[text] = Facts()
        return facts

    def _submit(self, ch: list[Pair]) -> tuple:
        sl, tl = self.langs
        asks: tuple[dict[str, Facts], dict[str, Facts]] = ({}, {})
        cands = [Candidate(p.src, p.tgt, sl, tl, self._facts(0, p.src, asks[0]), self._facts(1, p.tgt, asks[1]))
                 for p in ch]
        texts = (list(asks[0]), list(asks[1]))
        self.looked += 2 * len(ch)
        self.computed += len(texts[0]) + len(texts[1])
        job = (self.pool.apply_async(_facts_task, texts) if self.workers > 1 else _Done(_facts_task(*texts)))
        return ch, cands, asks, job

    def _finish(self, ch: list[Pair], cands: list[Candidate], asks: tuple, job) -> tuple:  # noqa: ANN001
        for side, rows in enumerate(job.get()):
            cache, inflight = self.caches[side], self.inflight[side]
            for (text, facts), row in zip(asks[side].items(), rows):
                facts.protected, facts.lang_prob, facts.n_tokens, facts.content = row
                del inflight[text]
                cache.put(text, facts)
        return ch, apply_filters(self.filters, cands)

    def run(self, chunks: Iterator[list[Pair]]) -> Iterator[tuple[list[Pair], list[tuple[str, str] | None]]]:
        # how far reading runs ahead decides where the read and dedup rejects of later chunks fall
        # among the filter rejects in the rejects file: none with 1 worker, 2 * workers chunks with more
        if self.workers <= 1:
            for ch in chunks:
                yield self._finish(*self._submit(ch))
            return
        pending: deque = deque()
        for ch in chunks:
            pending.append(self._submit(ch))
            if len(pending) >= 2 * self.workers:
                yield self._finish(*pending.popleft())
        while pending:
            yield self._finish(*pending.popleft())

    def stats(self) -> str:
        return (f"sentence facts: {self.computed} computed for {self.looked} sentences (the others were cached "
                f"or in flight), {sum(c.dropped for c in self.caches)} dropped from the cache")

    def close(self) -> None:
        if self.workers > 1:
            self.pool.close()
            self.pool.join()


def reject_line(p: Pair, step: str, reason: str) -> str:
    return format_tsv_line([str(p.line), step, reason, p.src.replace("\t", " "), p.tgt.replace("\t", " "),
                            *p.extra])


def _cleaned(p: Pair) -> Pair:
    p.src, p.tgt = clean_text(p.src), clean_text(p.tgt)
    return p


def find_duplicates(spec: InputSpec, max_chars: int, mem_budget_bytes: int,
                    workdir: str | Path | None = None) -> Sequence[int]:
    """Pass 1: duplicate mask over the defect-free pairs of ``spec`` (in reading order)."""
    finder = DuplicateFinder(mem_budget_bytes, workdir)
    prog = Progress("dedup pass 1", every=30.0)
    for p in spec.open(max_chars, ReadStats()):
        if p.defect is None:
            finder.add(pair_key(p.src, p.tgt))
            prog.tick()
    prog.done()
    return finder.mask()


class ShardedWriter:
    """Write kept lines to ``path`` or, with ``shard_size``, to ``stem.00000.suffix`` ... files."""

    def __init__(self, path: str | Path, shard_size: int | None = None):
        self.path, self.shard_size = Path(path), shard_size
        self.files: list[Path] = []
        self._fh: AtomicWriter | None = None
        self._n = 0

    def _name(self, i: int) -> Path:
        suffixes = "".join(self.path.suffixes)
        stem = self.path.name[: len(self.path.name) - len(suffixes)] if suffixes else self.path.name
        return self.path.with_name(f"{stem}.{i:05d}{suffixes}")

    def write(self, line: str) -> None:
        if self._fh is None or (self.shard_size and self._n % self.shard_size == 0 and self._n):
            self.close()
            target = self._name(len(self.files)) if self.shard_size else self.path
            self.files.append(target)
            self._fh = open_text_out(target)
        assert self._fh is not None
        self._fh.write(line)
        self._n += 1

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def abort(self) -> None:
        """Drop the file being written (finished shard files stay: each is complete)."""
        if self._fh is not None:
            self._fh.abort()
            self._fh = None

    def finish(self) -> list[Path]:
        if not self.files:  # nothing kept: still leave an (empty) output behind
            self.write("")
            self._n = 0
        self.close()
        return self.files


def preprocess(spec: InputSpec, output: str | Path, rejects: str | Path, ledger_path: str | Path,
               settings: PreprocessSettings, *, dedup: bool = True, workers: int = 1,
               chunk_size: int = 2000, shard_size: int | None = None,
               dedup_mem_mb: int = 1024, tmpdir: str | Path | None = None,
               allow_empty: bool = False, cache_mb: int = PREPROCESS_CACHE_MB) -> Ledger:
    """Run all steps over ``spec``; returns the ledger (also written to ``ledger_path``).

    ``cache_mb``: RAM for the filter facts of sentences already seen (both sides together; 0 = no
    cache), :mod:`marginmine.preprocess.facts`; the outputs do not depend on it.

    An empty input is an error unless ``allow_empty`` (an empty shard of ``split`` when
    ``corpus.expected_pairs`` overestimates the corpus): then the outputs are empty and the ledger
    counts 0 pairs."""
    ledger = Ledger()
    ledger.declare(s for s in STEPS if s != "test_overlap" or settings.protected)
    if not dedup:
        ledger.steps.remove("dedup")
    if not settings.langid:
        ledger.steps.remove("langid")
    empty = allow_empty and spec.is_empty()
    if empty:
        log.warning("%s is empty: writing empty outputs and a ledger of 0 pairs", spec)
    dup_mask = (find_duplicates(spec, settings.max_chars, dedup_mem_mb << 20, tmpdir)
                if dedup and not empty else None)
    stats = ReadStats()
    writer = ShardedWriter(output, shard_size)
    runner = _ChunkRunner(settings, workers, cache_mb << 20)
    prog = Progress(f"preprocess {spec}")
    with open_text_out(rejects) as rej:
        def chunks() -> Iterator[list[Pair]]:
            buf: list[Pair] = []
            k = 0
            for p in () if empty else spec.open(settings.max_chars, stats):
                prog.tick()
                if p.defect is not None:
                    ledger.add_removed("read", p.defect, length_bucket(p.src))
                    rej.write(reject_line(p, "read", p.defect))
                    continue
                is_dup = dup_mask is not None and dup_mask[k]
                k += 1
                if is_dup:
                    ledger.add_removed("dedup", "duplicate", length_bucket(p.src))
                    rej.write(reject_line(p, "dedup", "duplicate"))
                    continue
                buf.append(_cleaned(p))
                if len(buf) >= chunk_size:
                    yield buf
                    buf = []
            if buf:
                yield buf

        try:
            for ch, verdicts in runner.run(chunks()):
                for p, v in zip(ch, verdicts):
                    bucket = length_bucket(p.src)
                    if v is None:
                        ledger.add_kept(bucket)
                        writer.write(format_tsv_line([p.src, p.tgt, *p.extra]))
                    else:
                        ledger.add_removed(v[0], v[1], bucket)
                        rej.write(reject_line(p, *v))
        except BaseException:
            writer.abort()
            raise
        finally:
            runner.close()
    log.info("%s", runner.stats())
    files = writer.finish()
    prog.done()
    ledger.notes.update(stats.notes)
    if shard_size:
        ledger.notes["output_shards"] = len(files)
    ledger.write(ledger_path)
    log.info("ledger:\n%s", ledger.summary())
    return ledger
