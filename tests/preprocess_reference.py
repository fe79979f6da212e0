"""The preprocessing as it was before the sentence cache, the fast tokenizer and the reader and
normal-form shortcuts (commit e282dd7), kept as the oracle that tests/test_preprocess_cache.py
compares the current outputs with byte for byte.

Every pair is filtered on its own, in the workers: sacremoses' Moses tokens, a fastText call per
side of each pair, the filters' scores computed from the tokens. Copied here: the filter stage, the
TSV reader with its checks on every line, the normal forms, the length buckets and pass 1 of the
dedup. The rest is the package's, which this work did not change: the line reader and its defect
checks (``iter_raw_lines``, ``clean_field``), the dedup's key sorting, the ledger's counting and
files, the writers.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import re
import unicodedata
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from marginmine.errors import InputError
from marginmine.io.progress import Progress
from marginmine.io.text import (
    DEFAULT_MAX_CHARS,
    Pair,
    ReadStats,
    _decode,
    _make_pair,
    format_tsv_line,
    iter_raw_lines,
    open_binary,
    open_text_out,
)
from marginmine.preprocess.dedup import DuplicateFinder
from marginmine.preprocess.langid import language_probs
from marginmine.preprocess.ledger import BUCKET_EDGES, BUCKETS, Ledger
from marginmine.preprocess.pipeline import STEPS, InputSpec, PreprocessSettings, ShardedWriter, reject_line
from marginmine.preprocess.tokens import moses_tokenize as tokenize

_WS = re.compile(r"\s+")
_NON_SPACE_WS = re.compile(r"[^\S ]")


def _is_plain(text: str) -> bool:
    return (text.isascii() and "  " not in text and not text.startswith(" ") and not text.endswith(" ")
            and _NON_SPACE_WS.search(text) is None)


def clean_text(text: str) -> str:
    if _is_plain(text):
        return text
    return _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()


def match_form(text: str) -> str:
    if _is_plain(text):
        return text
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def pair_key(src: str, tgt: str) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    h.update(match_form(src).encode("utf-8"))
    h.update(b"\t")
    h.update(match_form(tgt).encode("utf-8"))
    return h.digest()


def sentence_key(text: str) -> bytes:
    return hashlib.blake2b(match_form(text).encode("utf-8"), digest_size=16).digest()


def length_bucket(src: str) -> str:
    n = len(src.split())
    for label, lo in zip(reversed(BUCKETS), reversed(BUCKET_EDGES)):
        if n >= lo:
            return label
    return BUCKETS[0]


def read_tsv(path: str | Path, columns: Sequence[int] = (0, 1), max_chars: int = DEFAULT_MAX_CHARS,
             stats: ReadStats | None = None) -> Iterator[Pair]:
    stats = stats if stats is not None else ReadStats()
    si, ti = columns
    n = 0
    with open_binary(path) as fh:
        for n, (raw, too_long) in enumerate(iter_raw_lines(fh, 4 * max_chars + 64, str(path)), 1):
            if raw.endswith(b"\r"):
                raw = raw[:-1]
                stats.notes["crlf"] += 1
            cols = raw.split(b"\t")
            if too_long:
                yield Pair(n, "", "", (), "too_long")
                continue
            if len(cols) <= max(si, ti):
                text, _ = _decode(raw)
                yield Pair(n, text, "", (), "missing_column")
                continue
            extra = tuple(_decode(c)[0] for i, c in enumerate(cols) if i not in (si, ti))
            pair = _make_pair(n, cols[si], cols[ti], extra, False, stats)
            if pair.defect is None and max(len(pair.src), len(pair.tgt)) > max_chars:
                pair.defect = "too_long"
            yield pair
    if n == 0:
        raise InputError(str(path), "corpus is empty (0 lines)", hint="check the file or its source")


def open_spec(spec: InputSpec, max_chars: int, stats: ReadStats) -> Iterator[Pair]:
    assert len(spec.paths) == 1, "the reference reads one TSV file"
    return read_tsv(spec.paths[0], spec.columns, max_chars, stats)


def _cleaned(p: Pair) -> Pair:
    p.src, p.tgt = clean_text(p.src), clean_text(p.tgt)
    return p


def find_duplicates(spec: InputSpec, max_chars: int, mem_budget_bytes: int,
                    workdir: str | Path | None = None) -> Sequence[int]:
    finder = DuplicateFinder(mem_budget_bytes, workdir)
    for p in open_spec(spec, max_chars, ReadStats()):
        if p.defect is None:
            finder.add(pair_key(p.src, p.tgt))
    return finder.mask()


_HAS_LETTER = re.compile(r"[^\W\d_]")


def content_tokens(tokens: list[str]) -> set[str]:
    words = {t.lower() for t in tokens if _HAS_LETTER.search(t)}
    return words if words else {t.lower() for t in tokens}


def token_overlap(src_tokens: list[str], tgt_tokens: list[str]) -> float:
    s, t = content_tokens(src_tokens), content_tokens(tgt_tokens)
    if not s or not t:
        return 0.0
    return len(s & t) / len(s | t)


def length_ratio(n_src: int, n_tgt: int) -> float:
    lo, hi = min(n_src, n_tgt), max(n_src, n_tgt)
    return float("inf") if lo == 0 else hi / lo


@dataclass(slots=True)
class Candidate:
    src: str
    tgt: str
    src_lang: str
    tgt_lang: str
    _src_tokens: list[str] | None = field(default=None, repr=False)
    _tgt_tokens: list[str] | None = field(default=None, repr=False)

    @property
    def src_tokens(self) -> list[str]:
        if self._src_tokens is None:
            self._src_tokens = tokenize(self.src, self.src_lang)
        return self._src_tokens

    @property
    def tgt_tokens(self) -> list[str]:
        if self._tgt_tokens is None:
            self._tgt_tokens = tokenize(self.tgt, self.tgt_lang)
        return self._tgt_tokens


@dataclass
class LengthFilter:
    min_tokens: int
    max_tokens: int
    name: str = "length"

    def score(self, batch: Sequence[Candidate]) -> list[tuple[int, int]]:
        return [(len(c.src_tokens), len(c.tgt_tokens)) for c in batch]

    def accept(self, score: tuple[int, int]) -> bool:
        return all(self.min_tokens <= n <= self.max_tokens for n in score)

    def reason(self, score: tuple[int, int]) -> str:
        return "too_short" if min(score) < self.min_tokens else "too_many_tokens"


@dataclass
class TokenOverlapFilter:
    max_overlap: float
    name: str = "overlap"

    def score(self, batch: Sequence[Candidate]) -> list[float]:
        return [token_overlap(c.src_tokens, c.tgt_tokens) for c in batch]

    def accept(self, score: float) -> bool:
        return score < self.max_overlap

    def reason(self, score: float) -> str:
        return "copy" if score >= 1.0 else "token_overlap"


@dataclass
class LengthRatioFilter:
    max_ratio: float
    name: str = "ratio"

    def score(self, batch: Sequence[Candidate]) -> list[float]:
        return [length_ratio(len(c.src_tokens), len(c.tgt_tokens)) for c in batch]

    def accept(self, score: float) -> bool:
        return score <= self.max_ratio

    def reason(self, score: float) -> str:
        return "length_ratio"


@dataclass
class ProtectedSetFilter:
    keys: frozenset[bytes]
    name: str = "test_overlap"

    def score(self, batch: Sequence[Candidate]) -> list[bool]:
        return [sentence_key(c.src) in self.keys or sentence_key(c.tgt) in self.keys for c in batch]

    def accept(self, score: bool) -> bool:
        return not score

    def reason(self, score: bool) -> str:
        return "test_set_overlap"


@dataclass
class LangIdFilter:
    min_prob: float
    model_path: str | None = None
    name: str = field(default="langid")

    def score(self, batch: Sequence[Candidate]) -> list[tuple[float, float]]:
        src = language_probs([c.src for c in batch], self.model_path)
        tgt = language_probs([c.tgt for c in batch], self.model_path)
        return [(s.get(c.src_lang, 0.0), t.get(c.tgt_lang, 0.0)) for s, t, c in zip(src, tgt, batch)]

    def accept(self, score: tuple[float, float]) -> bool:
        return min(score) >= self.min_prob

    def reason(self, score: tuple[float, float]) -> str:
        bad_s, bad_t = score[0] < self.min_prob, score[1] < self.min_prob
        return "wrong_lang_both" if bad_s and bad_t else ("wrong_lang_src" if bad_s else "wrong_lang_tgt")


def filters(settings: PreprocessSettings) -> list[Any]:
    out: list[Any] = []
    if settings.protected:
        out.append(ProtectedSetFilter(settings.protected))
    if settings.langid:
        out.append(LangIdFilter(settings.langid_min_prob, settings.langid_model))
    out += [LengthFilter(settings.min_tokens, settings.max_tokens), TokenOverlapFilter(settings.max_overlap),
            LengthRatioFilter(settings.max_ratio)]
    return out


def apply_filters(flts: Sequence[Any], batch: Sequence[Candidate]) -> list[tuple[str, str] | None]:
    verdicts: list[tuple[str, str] | None] = [None] * len(batch)
    alive = list(range(len(batch)))
    for flt in flts:
        if not alive:
            break
        scores = flt.score([batch[i] for i in alive])
        still = []
        for i, s in zip(alive, scores):
            if flt.accept(s):
                still.append(i)
            else:
                verdicts[i] = (flt.name, flt.reason(s))
        alive = still
    return verdicts


_WORKER_FILTERS: list[Any] = []
_WORKER_LANGS: tuple[str, str] = ("", "")


def _init_worker(settings: PreprocessSettings) -> None:
    global _WORKER_FILTERS, _WORKER_LANGS
    _WORKER_FILTERS = filters(settings)
    _WORKER_LANGS = (settings.src_lang, settings.tgt_lang)


def _filter_chunk(texts: list[tuple[str, str]]) -> list[tuple[str, str] | None]:
    sl, tl = _WORKER_LANGS
    return apply_filters(_WORKER_FILTERS, [Candidate(s, t, sl, tl) for s, t in texts])


class _ChunkRunner:
    def __init__(self, settings: PreprocessSettings, workers: int):
        self.workers = workers
        if workers > 1:
            self.pool = mp.get_context("fork").Pool(workers, _init_worker, (settings,))
        else:
            _init_worker(settings)

    def run(self, chunks: Iterator[list[Pair]]) -> Iterator[tuple[list[Pair], list[tuple[str, str] | None]]]:
        if self.workers <= 1:
            for ch in chunks:
                yield ch, _filter_chunk([(p.src, p.tgt) for p in ch])
            return
        pending: deque = deque()
        for ch in chunks:
            pending.append((ch, self.pool.apply_async(_filter_chunk, ([(p.src, p.tgt) for p in ch],))))
            if len(pending) >= 2 * self.workers:
                ch0, res = pending.popleft()
                yield ch0, res.get()
        while pending:
            ch0, res = pending.popleft()
            yield ch0, res.get()

    def close(self) -> None:
        if self.workers > 1:
            self.pool.close()
            self.pool.join()


def preprocess(spec: InputSpec, output: str | Path, rejects: str | Path, ledger_path: str | Path,
               settings: PreprocessSettings, *, dedup: bool = True, workers: int = 1,
               chunk_size: int = 2000, shard_size: int | None = None,
               dedup_mem_mb: int = 1024, tmpdir: str | Path | None = None,
               allow_empty: bool = False) -> Ledger:
    ledger = Ledger()
    ledger.declare(s for s in STEPS if s != "test_overlap" or settings.protected)
    if not dedup:
        ledger.steps.remove("dedup")
    if not settings.langid:
        ledger.steps.remove("langid")
    empty = allow_empty and spec.is_empty()
    dup_mask = (find_duplicates(spec, settings.max_chars, dedup_mem_mb << 20, tmpdir)
                if dedup and not empty else None)
    stats = ReadStats()
    writer = ShardedWriter(output, shard_size)
    runner = _ChunkRunner(settings, workers)
    prog = Progress(f"preprocess {spec}")
    with open_text_out(rejects) as rej:
        def chunks() -> Iterator[list[Pair]]:
            buf: list[Pair] = []
            k = 0
            for p in () if empty else open_spec(spec, settings.max_chars, stats):
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
    files = writer.finish()
    prog.done()
    ledger.notes.update(stats.notes)
    if shard_size:
        ledger.notes["output_shards"] = len(files)
    ledger.write(ledger_path)
    return ledger
