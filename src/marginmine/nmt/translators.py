"""Training data of the translators that translate-then-vote uses (:mod:`marginmine.scoring.votes`).

The translators are ordinary systems of our NMT stage (``train-nmt``), one per direction, trained
on the pairs of the encoder's training data in that language pair
(:mod:`marginmine.encoders.data`: already checked against every protected dev/test/evaluation
set and, with ``exclude_corpus``, against the corpus that will be scored; its ``report.json``
counts what was removed). The reverse direction is the same pairs with the columns swapped.
``max_pairs`` keeps a seeded uniform sample of that many pairs (file order kept; the same pairs for
both directions), recorded in the report as what was available and what was kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from marginmine.defaults import SEED


def translator_pairs(manifest: str | Path, src_lang: str, tgt_lang: str, output: str | Path,
                     report: str | Path | None = None, *, max_pairs: int = 0, seed: int = SEED) -> dict[str, Any]:
    """The translator's training pairs: :func:`marginmine.encoders.data.sample_pairs` of the encoder
    data's ``src_lang``-``tgt_lang`` pairs (all, or a seeded sample of ``max_pairs``)."""
    from marginmine.encoders.data import sample_pairs

    return sample_pairs(manifest, src_lang, tgt_lang, output, report, max_pairs=max_pairs, seed=seed,
                        purpose=f"to train a {src_lang}>{tgt_lang} translator")
