"""Global read + dedup, then a split into a fixed number of shards for parallel jobs.

A workflow must know its shard count before it runs (so that ``snakemake -n`` plans every
shard job), while the corpus size is only known after download. So the count comes from the
config (``ceil(expected_pairs / shard_size)``) and pairs are dealt to shards in blocks of
``block`` consecutive lines, round robin: shard sizes differ by at most one block, no count
pass is needed, and the assignment depends only on the input order (deterministic).
Duplicates are found over the *whole* corpus before the split, so no duplicate survives in
different shards. When ``expected_pairs`` overestimates the corpus, the last shards are empty:
valid, empty files that every later step (``--allow-empty``) turns into empty outputs, with the
ledger still accounting for every pair; ``snakemake -n`` keeps planning the configured count.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from pathlib import Path
from typing import Sequence

from marginmine.io.progress import Progress
from marginmine.io.text import DEFAULT_MAX_CHARS, ReadStats, format_tsv_line, open_text_out
from marginmine.preprocess.ledger import Ledger, length_bucket
from marginmine.preprocess.normalize import clean_text
from marginmine.preprocess.pipeline import InputSpec, find_duplicates, reject_line

log = logging.getLogger(__name__)


def shard_ids(n_shards: int) -> list[str]:
    """Zero-padded shard ids ``0000``, ``0001``, ... (wider when there are more than 10,000)."""
    width = max(4, len(str(n_shards - 1)))
    return [f"{i:0{width}d}" for i in range(n_shards)]


def shard_of(index: int, n_shards: int, block: int) -> int:
    """Shard of the ``index``-th kept pair (0-based)."""
    return (index // block) % n_shards


def split_corpus(spec: InputSpec, shard_paths: Sequence[str | Path], rejects: str | Path,
                 ledger_path: str | Path, *, block: int = 10_000, max_chars: int = DEFAULT_MAX_CHARS,
                 dedup_mem_mb: int = 1024, tmpdir: str | Path | None = None) -> Ledger:
    """Read ``spec``, drop defective and duplicate pairs (to ``rejects``), deal the rest to shards.

    The ledger has the steps ``read`` and ``dedup``; per-shard preprocessing ledgers continue it
    (see :meth:`marginmine.preprocess.ledger.Ledger.then`).
    """
    ledger = Ledger()
    ledger.declare(["read", "dedup"])
    dup_mask = find_duplicates(spec, max_chars, dedup_mem_mb << 20, tmpdir)
    stats = ReadStats()
    prog = Progress(f"split {spec}")
    k = kept = 0
    with ExitStack() as stack:  # every shard appears only if the whole split succeeds
        outs = [stack.enter_context(open_text_out(p)) for p in shard_paths]
        with open_text_out(rejects) as rej:
            for p in spec.open(max_chars, stats):
                prog.tick()
                if p.defect is not None:
                    ledger.add_removed("read", p.defect, length_bucket(p.src))
                    rej.write(reject_line(p, "read", p.defect))
                    continue
                k += 1
                if dup_mask[k - 1]:
                    ledger.add_removed("dedup", "duplicate", length_bucket(p.src))
                    rej.write(reject_line(p, "dedup", "duplicate"))
                    continue
                src, tgt = clean_text(p.src), clean_text(p.tgt)
                ledger.add_kept(length_bucket(src))
                outs[shard_of(kept, len(outs), block)].write(format_tsv_line([src, tgt, *p.extra]))
                kept += 1
    prog.done()
    ledger.notes.update(stats.notes)
    empty = max(0, len(outs) - -(-kept // block))
    if empty:  # valid: every later step writes empty outputs for them (--allow-empty)
        log.warning("only %d pairs for %d shards of block %d: %d shard(s) are empty (valid, but "
                    "lower corpus.expected_pairs to save their jobs)", kept, len(outs), block, empty)
    ledger.write(ledger_path)
    log.info("ledger:\n%s", ledger.summary())
    return ledger
