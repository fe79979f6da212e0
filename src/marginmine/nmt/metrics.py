"""Corpus metrics as per-sentence sufficient statistics: sacreBLEU's BLEU and chrF.

A :class:`Metric` is what the two-level bootstrap (:mod:`marginmine.nmt.significance`) needs of a
corpus metric: ``extract(hyps, refs)``, the per-sentence statistics (an int64 array, one row per
sentence, ``columns`` wide, from sacreBLEU's own ``_extract_corpus_statistics``), and ``score(stats)``,
the corpus score (0-100) of statistics summed over sentences, vectorised over leading axes. Both
metrics are corpus metrics of summed statistics (not a mean of sentence scores), so the score of the
summed rows equals sacreBLEU's corpus score on the same lines (tested to 1e-6):

* :data:`BLEU_METRIC`: ``BLEU()`` with its defaults (13a tokenizer, mixed case, ``exp`` smoothing);
  statistics hyp_len, ref_len, correct_1..4, total_1..4 (sacreBLEU's order).
* :data:`CHRF_METRIC`: ``CHRF()`` with its defaults (chrF2: character n-grams 1..6, no word n-grams,
  beta 2, whitespace dropped, mixed case, no epsilon smoothing); statistics hyp, ref and matched
  n-grams per order (3 x 6 columns). The score averages precision and recall over the orders where
  hypothesis and reference both have n-grams (sacreBLEU's "effective order"), then takes F-beta.

``signature()`` is sacreBLEU's signature string of the metric (one reference), the one its CLI prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from marginmine.errors import MarginmineError

if TYPE_CHECKING:
    import numpy as np

#: columns of a BLEU statistics row: hyp_len, ref_len, correct_1..4, total_1..4 (sacreBLEU's order)
NGRAM = 4
STAT_COLUMNS = 2 + 2 * NGRAM
#: chrF defaults (sacreBLEU's CHRF()): character order, word order, beta
CHAR_ORDER, WORD_ORDER, BETA = 6, 0, 2
CHRF_COLUMNS = 3 * (CHAR_ORDER + WORD_ORDER)


@dataclass(frozen=True)
class Metric:
    key: str  # column prefix in the tables: "bleu", "chrf"
    name: str  # as printed: "BLEU", "chrF"
    columns: int
    extract: Callable[[Sequence[str], Sequence[str]], np.ndarray]
    score: Callable[[np.ndarray], np.ndarray]
    signature: Callable[[], str]


def _bleu_metric():  # noqa: ANN202 - sacrebleu is imported lazily
    from sacrebleu.metrics import BLEU

    return BLEU()


def _chrf_metric():  # noqa: ANN202
    from sacrebleu.metrics import CHRF

    m = CHRF()
    if (m.char_order, m.word_order, m.beta) != (CHAR_ORDER, WORD_ORDER, BETA):  # a sacreBLEU with other defaults
        raise MarginmineError(f"sacreBLEU's CHRF() defaults are ({m.char_order}, {m.word_order}, {m.beta}), "
                              f"marginmine's chrF statistics assume ({CHAR_ORDER}, {WORD_ORDER}, {BETA})")
    return m


def _extract(metric, columns: int, hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:  # noqa: ANN001
    import numpy as np

    if len(hyps) != len(refs):
        raise MarginmineError(f"{len(hyps)} hypotheses for {len(refs)} references")
    rows = metric._extract_corpus_statistics(list(hyps), [list(refs)])
    return np.asarray(rows, dtype=np.int64).reshape(len(refs), columns)


def sentence_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """Per-sentence sacreBLEU BLEU statistics, shape ``(len(refs), STAT_COLUMNS)``, int64."""
    return _extract(_bleu_metric(), STAT_COLUMNS, hyps, refs)


def chrf_sentence_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """Per-sentence sacreBLEU chrF statistics, shape ``(len(refs), CHRF_COLUMNS)``, int64."""
    return _extract(_chrf_metric(), CHRF_COLUMNS, hyps, refs)


def bleu_from_stats(stats: np.ndarray) -> np.ndarray:
    """Corpus BLEU (0-100) of summed statistics, vectorised over leading axes: ``(..., STAT_COLUMNS)``
    gives ``(...)``. Exactly sacreBLEU's ``compute_bleu`` with ``exp`` smoothing, no effective order."""
    import numpy as np

    s = np.asarray(stats, dtype=np.float64)
    sys_len, ref_len = s[..., 0], s[..., 1]
    correct, total = s[..., 2:2 + NGRAM], s[..., 2 + NGRAM:2 + 2 * NGRAM]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bp = np.where(sys_len >= ref_len, 1.0, np.where(sys_len > 0, np.exp(1 - ref_len / sys_len), 0.0))
        zero = correct == 0
        halvings = np.cumsum(zero, axis=-1)  # 'exp' smoothing: 1/2, 1/4, ... of a match per empty order
        prec = np.where(zero, 100.0 / (2.0 ** halvings * total), 100.0 * correct / total)
        logp = np.log(np.where(total > 0, prec, 1.0)).mean(axis=-1)
        score = bp * np.exp(logp)
    dead = (total == 0).any(axis=-1) | zero.all(axis=-1)  # sacreBLEU: log(0) -> score 0
    return np.where(dead, 0.0, score)


def chrf_from_stats(stats: np.ndarray) -> np.ndarray:
    """Corpus chrF (0-100) of summed statistics, vectorised over leading axes: ``(..., CHRF_COLUMNS)``
    gives ``(...)``. Exactly sacreBLEU's ``CHRF._compute_f_score`` without epsilon smoothing."""
    import numpy as np

    s = np.asarray(stats, dtype=np.float64)
    s = s.reshape(*s.shape[:-1], CHAR_ORDER + WORD_ORDER, 3)
    n_hyp, n_ref, n_match = s[..., 0], s[..., 1], s[..., 2]
    counted = (n_hyp > 0) & (n_ref > 0)  # the orders of the effective order
    with np.errstate(divide="ignore", invalid="ignore"):
        prec = np.where(counted, n_match / n_hyp, 0.0)
        rec = np.where(counted, n_match / n_ref, 0.0)
        k = counted.sum(axis=-1)
        avg_p = np.where(k > 0, prec.sum(axis=-1) / k, 0.0)
        avg_r = np.where(k > 0, rec.sum(axis=-1) / k, 0.0)
        f = BETA ** 2
        score = 100.0 * (1 + f) * avg_p * avg_r / (f * avg_p + avg_r)
    return np.where(avg_p + avg_r > 0, score, 0.0)


def _signature(make: Callable[[], object]) -> Callable[[], str]:
    def signature() -> str:
        m = make()
        m.corpus_score(["x"], [["x"]])  # sacreBLEU knows the number of references only after a score
        return str(m.get_signature())

    return signature


BLEU_METRIC = Metric("bleu", "BLEU", STAT_COLUMNS, sentence_stats, bleu_from_stats, _signature(_bleu_metric))
CHRF_METRIC = Metric("chrf", "chrF", CHRF_COLUMNS, chrf_sentence_stats, chrf_from_stats, _signature(_chrf_metric))
