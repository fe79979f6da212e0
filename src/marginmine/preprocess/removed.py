"""A seeded sample of the pairs each preprocessing step removed, read from the rejects files.

Every removed pair is already in a rejects file (``split``'s for the steps ``read`` and ``dedup``,
each shard's for the filters; TSV: line, step, reason, source, target, carried columns). The sample
keeps, per step, the ``per_step`` rejects with the smallest *priority*, a 64-bit mix of the seed, the
file's index and the reject's line number (a bottom-k sample: uniform without replacement, like a
reservoir). Because the priority depends on the pair and not on when it is read, the sample

* is the same however the rejects file is ordered (the order of read and filter rejects in it
  depends on the worker count) and after any interrupted and repeated run;
* of the whole corpus is the union of the shards' samples cut to ``per_step`` by the same
  priority: sampling shard by shard and merging gives exactly the sample of all rejects;
* holds ``per_step`` pairs per step in memory, whatever the size of the file.

A shard's line number is mapped back to the line of the raw corpus with the split's layout
(:func:`marginmine.preprocess.shard.shard_of`) and the line numbers of the split's rejects, read
once in order (:func:`raw_lines`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from marginmine.defaults import PER_STEP
from marginmine.errors import InputError
from marginmine.io.text import format_tsv_line, iter_sentences, open_text_out
from marginmine.preprocess.pipeline import STEPS

#: the file index of ``split``'s rejects (raw-corpus line numbers); shards count from 0
SPLIT = -1
HEADER = ("priority", "file", "line", "step", "reason", "src", "tgt", "extra")
_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64's finaliser: a bijection of 64-bit integers that spreads every input bit."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def priority(seed: int, file: int, line: int) -> int:
    """The sampling key of one reject: smaller is sampled first."""
    return _mix(_mix(_mix(seed & _MASK) ^ (file & _MASK)) ^ line)


@dataclass(frozen=True, order=True)
class Removed:
    """One removed pair. ``file`` is :data:`SPLIT` or the shard's index, ``line`` the 1-based line in
    that file's input (the raw corpus for ``SPLIT``); ``raw_line`` the raw corpus line, once known."""

    priority: int
    file: int
    line: int
    step: str
    reason: str
    src: str
    tgt: str
    extra: str = ""
    raw_line: int | None = None


def iter_rejects(path: str | Path, file: int, seed: int) -> Iterator[Removed]:
    """Every reject of a rejects file, with its priority (an error names a malformed line)."""
    for n, text in enumerate(iter_sentences(path), 1):
        if not text:
            continue
        cols = text.split("\t")
        if len(cols) < 5 or not cols[0].isdigit():
            raise InputError(str(path), "not a rejects line (line, step, reason, source, target, ...)", line=n,
                             hint="give a rejects file written by marginmine preprocess or split")
        line = int(cols[0])
        yield Removed(priority(seed, file, line), file, line, cols[1], cols[2], cols[3], cols[4], " ".join(cols[5:]))


def bottom_k(rows: Iterable[Removed], per_step: int = PER_STEP) -> list[Removed]:
    """The ``per_step`` rows of smallest priority of each step, the steps in pipeline order (others
    after, by name), each by priority; memory: ``per_step`` rows per step."""
    heaps: dict[str, list[tuple[int, int, int, Removed]]] = {}
    for r in rows:
        heap = heaps.setdefault(r.step, [])
        item = (-r.priority, -r.file, -r.line, r)  # a max-heap of the kept: its top is the first to go
        if len(heap) < per_step:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    rank = {s: i for i, s in enumerate(STEPS)}
    return sorted((i[3] for h in heaps.values() for i in h),
                  key=lambda r: (rank.get(r.step, len(rank)), r.step, r.priority, r.file, r.line))


def sample_rejects(path: str | Path, file: int, seed: int, per_step: int = PER_STEP) -> list[Removed]:
    """The sample of one rejects file (``file``: :data:`SPLIT` or the shard's index)."""
    return bottom_k(iter_rejects(path, file, seed), per_step)


def write_sample(rows: Sequence[Removed], path: str | Path) -> None:
    """The sample as TSV (:data:`HEADER`; the texts come from a rejects file: no tab, no newline)."""
    with open_text_out(path) as out:
        out.write(format_tsv_line(HEADER))
        for r in rows:
            out.write(format_tsv_line([f"{r.priority:016x}", str(r.file), str(r.line), r.step, r.reason, r.src,
                                       r.tgt, r.extra]))


def read_sample(path: str | Path) -> list[Removed]:
    """A sample written by :func:`write_sample`."""
    rows: list[Removed] = []
    for n, text in enumerate(iter_sentences(path), 1):
        cols = text.split("\t")
        if n == 1:
            if tuple(cols) != HEADER:
                raise InputError(str(path), f"header is not {' '.join(HEADER)}", line=1,
                                 hint="give a sample written by marginmine removed-sample")
            continue
        try:
            rows.append(Removed(int(cols[0], 16), int(cols[1]), int(cols[2]), *cols[3:8]))
        except (ValueError, TypeError) as exc:
            raise InputError(str(path), "not a removed-pair sample line", line=n,
                             hint="give a sample written by marginmine removed-sample") from exc
    return rows


def kept_index(shard: int, line: int, n_shards: int, block: int) -> int:
    """0-based index, among the pairs ``split`` kept, of line ``line`` (1-based) of shard ``shard``:
    the inverse of :func:`marginmine.preprocess.shard.shard_of`."""
    j = line - 1
    return ((j // block) * n_shards + shard) * block + j % block


def raw_lines(kept: Iterable[int], split_reject_lines: Iterable[int]) -> dict[int, int]:
    """Raw corpus line (1-based) of each 0-based index among the pairs ``split`` kept, given the
    line numbers of its rejects in ascending order (read once, as far as the largest index needs)."""
    rejects = iter(split_reject_lines)
    nxt = next(rejects, None)
    seen = 0
    out: dict[int, int] = {}
    for i in sorted(set(kept)):
        line = i + 1 + seen
        while nxt is not None and nxt <= line:  # every reject at or before the line pushes it one on
            seen += 1
            line += 1
            nxt = next(rejects, None)
        out[i] = line
    return out


def reject_line_numbers(path: str | Path) -> Iterator[int]:
    """The line numbers of a rejects file, checked to ascend (``split`` writes them in reading order)."""
    last = 0
    for n, text in enumerate(iter_sentences(path), 1):
        head = text.partition("\t")[0]
        if not head.isdigit() or int(head) <= last:
            raise InputError(str(path), "line numbers of split's rejects must be numbers that ascend", line=n,
                             hint="give the rejects file written by marginmine split")
        last = int(head)
        yield last


def merged_sample(split_rejects: str | Path | None, shard_samples: Sequence[str | Path], seed: int,
                  n_shards: int, block: int, per_step: int = PER_STEP) -> list[Removed]:
    """The sample of every removed pair of the corpus: ``split``'s rejects sampled here (steps
    ``read``, ``dedup``), the shards' samples merged, each shard pair's raw line found through the split's
    reject lines (``split_rejects`` None: only the shards' samples, with no raw line)."""
    rows = [r for p in shard_samples for r in read_sample(p)]
    bad = [r for r in rows if not 0 <= r.file < n_shards]
    if bad:
        raise InputError(str(shard_samples[0]), f"holds shard {bad[0].file}, not one of {n_shards} shards",
                         hint="give every shard's sample and the run's shard count")
    if split_rejects is not None:
        rows += sample_rejects(split_rejects, SPLIT, seed, per_step)
    rows = bottom_k(rows, per_step)
    if split_rejects is None:
        return rows
    index = {r: kept_index(r.file, r.line, n_shards, block) for r in rows if r.file != SPLIT}
    raw = raw_lines(index.values(), reject_line_numbers(split_rejects))
    return [replace(r, raw_line=r.line if r.file == SPLIT else raw[index[r]]) for r in rows]
