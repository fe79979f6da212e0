"""BLEU over several training seeds: per-method mean and standard deviation, and a significance test
that sees both sources of variance (training seeds and test sentences).

Contract
--------
* Every hypothesis file has exactly one line per reference line; a missing file or one with fewer
  or more lines is refused (:class:`~marginmine.errors.InputError` naming the file and both counts).
* BLEU is sacreBLEU's corpus BLEU with its defaults (13a tokenizer, mixed case, ``exp`` smoothing),
  the number :func:`marginmine.nmt.evaluate.score_bleu` reports. It is computed once per sentence as
  sufficient statistics (hypothesis and reference length, matched and total n-grams, n = 1..4,
  from sacreBLEU itself); a corpus score is the BLEU of summed statistics (:func:`bleu_from_stats`),
  equal to ``sacrebleu.corpus_bleu`` on the same lines (tested to 1e-6).
* chrF is sacreBLEU's ``CHRF()`` (chrF2: character order 6, word order 0, beta 2), also a score of
  summed per-sentence statistics; the test is the same for any :class:`~marginmine.nmt.metrics.Metric`
  (``metric=``), and with the same settings every metric sees the same resampled rounds (the draws
  depend on the numbers of seeds and sentences only), so BLEU's and chrF's tests of one pair of
  methods resample the same test sets and seeds.
* :func:`summarize_seeds`: mean and sample standard deviation (n - 1) over seeds; the sd of a single
  seed is ``None`` (undefined, never shown as 0).
* :func:`seed_bootstrap`: method A vs B on one test set, each with one hypothesis file per seed.
  Deterministic given ``SignificanceSettings.seed`` and ``resamples``.

The test: a two-level paired bootstrap
--------------------------------------
Each of ``resamples`` rounds draws (1) the test sentences with replacement, one draw shared by both
methods (paired: both are scored on the same resampled test set, so sentence difficulty cancels as
in sacreBLEU's paired bootstrap), and (2) for each method independently its seeds with replacement
(as many as it has; different methods' seeds are independent training runs, not pairs). A method's
score is the mean corpus BLEU of its drawn seeds on the drawn sentences; the round's statistic is
A minus B. Why: at CPU scale two training seeds of one system differ by up to two BLEU, as much as
the gaps between methods, and a sentence-only bootstrap treats one training run as the method and
cannot see that; resampling seeds alone would ignore that the test set is a sample.
Two levels see both; pairing on sentences keeps the test as sharp as the data allow.
The interval is the percentile interval of the rounds' differences; the two-sided p-value is the
shifted-null bootstrap one (Efron & Tibshirani 1993, 16.4):
``(1 + #{|d_r - mean(d)| >= |d_obs|}) / (resamples + 1)``, so it is never 0 and it is 1 for identical
systems. (sacreBLEU's paired bootstrap centres the absolute differences instead and counts those
strictly larger than the observed absolute difference; docs/evaluation.md gives both formulas.)

Limits. Resampling S seeds with replacement gives the seed mean a variance of (S - 1)/S * s^2/S
(the plug-in variance): half the usual s^2/S for S = 2. With ``seed_correction`` (default) each
method's seed term is scaled by sqrt(S/(S - 1)) about its all-seed mean, which makes that variance
s^2/S. It cannot make s^2 itself reliable: with two seeds it rests on one degree of freedom, and a
bootstrap of two values has only three distinct seed draws, so p-values near 0.05 mean little; use
three or more seeds for claims. With one seed a method's seed variance is not seen at all (its seed
draw is always the same run): the test is then a sentence-only paired bootstrap for that method,
and :attr:`SignificanceResult.note` says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from marginmine.defaults import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from marginmine.errors import InputError, MarginmineError
from marginmine.io.text import read_lines

# NGRAM, STAT_COLUMNS, bleu_from_stats and sentence_stats are imported from here too (their old home)
from marginmine.nmt.metrics import (  # noqa: F401
    BLEU_METRIC,
    CHRF_METRIC,
    NGRAM,
    STAT_COLUMNS,
    Metric,
    bleu_from_stats,
    sentence_stats,
)

if TYPE_CHECKING:
    import numpy as np

_CHUNK = 100  # resamples per matrix product (memory: _CHUNK x sentences weights)


@dataclass(frozen=True)
class SignificanceSettings:
    resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = BOOTSTRAP_SEED
    confidence: float = 0.95
    resample_seeds: bool = True  # False: the sentence-only paired bootstrap (seeds always all used)
    seed_correction: bool = True  # scale the seed term by sqrt(S/(S-1)); see the module docstring

    def __post_init__(self) -> None:
        if self.resamples < 100:
            raise ValueError(f"resamples must be at least 100 (got {self.resamples})")
        if not 0.5 <= self.confidence < 1:
            raise ValueError(f"confidence must be in [0.5, 1) (got {self.confidence})")


def validate_seeds(seeds: Sequence[int], what: str = "nmt.seeds") -> tuple[int, ...]:
    """The training seeds as a tuple; an empty list, a non-integer or a repeated seed is refused."""
    seeds = list(seeds)
    if not seeds:
        raise MarginmineError(f"{what} is empty: give at least one training seed "
                              "(two or more to see seed variance)")
    bad = [s for s in seeds if isinstance(s, bool) or not isinstance(s, int)]
    if bad:
        raise MarginmineError(f"{what} must be integers, got {bad}")
    dupes = sorted({s for s in seeds if seeds.count(s) > 1})
    if dupes:
        raise MarginmineError(f"{what} {seeds} repeats seed(s) {dupes}: each seed trains one more model, "
                              "a repeat would count one run twice")
    return tuple(seeds)


def read_hypotheses(hyp_file: str | Path, n_ref: int, ref_file: str | Path) -> list[str]:
    """The lines of ``hyp_file``; refused if it is missing or its line count differs from ``n_ref``."""
    p = Path(hyp_file)
    if not p.is_file():
        raise InputError(str(p), "hypothesis file is missing",
                         hint="translate the test set for this seed first")
    hyps = read_lines(p)
    if len(hyps) != n_ref:
        raise InputError(str(p), f"has {len(hyps)} lines but the reference {ref_file} has {n_ref}",
                         hint="one hypothesis per reference line; a short file is a cut-off translation")
    return hyps


def read_reference(ref_file: str | Path) -> list[str]:
    p = Path(ref_file)
    if not p.is_file():
        raise InputError(str(p), "reference file is missing")
    refs = read_lines(p)
    if not refs:
        raise InputError(str(p), "reference is empty (0 lines)")
    return refs


def file_stats(hyp_file: str | Path, ref_file: str | Path, refs: Sequence[str] | None = None) -> np.ndarray:
    """:func:`sentence_stats` of a hypothesis file against a reference file (checked line counts)."""
    refs = read_reference(ref_file) if refs is None else refs
    return sentence_stats(read_hypotheses(hyp_file, len(refs), ref_file), refs)


@dataclass(frozen=True)
class SeedSummary:
    mean: float
    sd: float | None  # sample sd (n - 1); None for one seed
    n_seeds: int
    seeds: tuple[int, ...]


def summarize_seeds(bleu_by_seed: Mapping[int, float]) -> SeedSummary:
    """Mean and sample standard deviation of one method's BLEU over its seeds on one test set."""
    if not bleu_by_seed:
        raise MarginmineError("no seeds to summarise: a method needs at least one trained seed")
    seeds = tuple(sorted(bleu_by_seed))
    vals = [float(bleu_by_seed[s]) for s in seeds]
    mean = sum(vals) / len(vals)
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else None
    return SeedSummary(mean, sd, len(vals), seeds)


@dataclass(frozen=True)
class SignificanceResult:
    score_a: float  # mean over A's seeds of its corpus score (BLEU, chrF: ``metric``) on the full test set
    score_b: float
    diff: float  # score_a - score_b
    low: float  # percentile interval of the difference at settings.confidence
    high: float
    p_value: float  # two-sided, H0: no difference
    n_seeds_a: int
    n_seeds_b: int
    sentences: int
    resamples: int
    levels: str  # "seeds+sentences" or "sentences"
    note: str = ""
    metric: str = "BLEU"  # Metric.name

    @property
    def bleu_a(self) -> float:  # the names of the BLEU-only result
        return self._bleu(self.score_a)

    @property
    def bleu_b(self) -> float:
        return self._bleu(self.score_b)

    def _bleu(self, value: float) -> float:
        if self.metric != "BLEU":
            raise AttributeError(f"a {self.metric} test has no BLEU: use score_a/score_b")
        return value


def _seed_means(scores: np.ndarray, picks: np.ndarray | None, correction: bool) -> np.ndarray:
    """Per round, the mean score of the drawn seeds (``scores``: rounds x seeds)."""
    import numpy as np

    full = scores.mean(axis=1)
    s = scores.shape[1]
    if picks is None or s == 1:
        return full
    drawn = scores[np.arange(len(scores))[:, None], picks].mean(axis=1)
    factor = math.sqrt(s / (s - 1)) if correction else 1.0
    return full + factor * (drawn - full)


def seed_bootstrap_stats(stats_a: np.ndarray, stats_b: np.ndarray,
                         settings: SignificanceSettings = SignificanceSettings(),
                         metric: Metric = BLEU_METRIC) -> SignificanceResult:
    """The two-level paired bootstrap on precomputed statistics ``(seeds, sentences, metric.columns)``
    (BLEU's by default). The draws depend on ``settings`` and the shapes only, never on the metric."""
    import numpy as np

    a, b = np.asarray(stats_a), np.asarray(stats_b)
    for name, x in (("A", a), ("B", b)):
        if x.ndim != 3 or x.shape[2] != metric.columns:
            raise MarginmineError(f"method {name}: {metric.name} statistics must be seeds x sentences x "
                                  f"{metric.columns}, got shape {x.shape}")
        if x.shape[0] == 0:
            raise MarginmineError(f"method {name} has no seeds: nothing to compare")
    n = a.shape[1]
    if b.shape[1] != n or n == 0:
        raise MarginmineError(f"methods are scored on different test sets ({n} vs {b.shape[1]} sentences)")
    sa, sb = a.shape[0], b.shape[0]
    # sentences x (seeds * columns): one matrix product sums every seed's statistics per resample
    both = np.concatenate([a, b]).astype(np.float64).transpose(1, 0, 2).reshape(n, -1)
    observed = metric.score(both.sum(axis=0).reshape(sa + sb, metric.columns))
    score_a, score_b = float(observed[:sa].mean()), float(observed[sa:].mean())
    rng = np.random.default_rng(settings.seed)
    r_total = settings.resamples
    picks_a = rng.integers(0, sa, size=(r_total, sa)) if settings.resample_seeds else None
    picks_b = rng.integers(0, sb, size=(r_total, sb)) if settings.resample_seeds else None
    diffs = np.empty(r_total)
    for start in range(0, r_total, _CHUNK):
        r = min(_CHUNK, r_total - start)
        idx = rng.integers(0, n, size=(r, n)) + (np.arange(r) * n)[:, None]
        weights = np.bincount(idx.ravel(), minlength=r * n).reshape(r, n).astype(np.float64)
        scores = metric.score((weights @ both).reshape(r, sa + sb, metric.columns))  # rounds x seeds
        sl = slice(start, start + r)
        fix = settings.seed_correction
        mean_a = _seed_means(scores[:, :sa], None if picks_a is None else picks_a[sl], fix)
        mean_b = _seed_means(scores[:, sa:], None if picks_b is None else picks_b[sl], fix)
        diffs[sl] = mean_a - mean_b
    d_obs = score_a - score_b
    alpha = 1 - settings.confidence
    low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
    from marginmine.stats import shifted_null_p

    p = shifted_null_p(diffs, d_obs, tolerance=1e-9)
    levels = "seeds+sentences" if settings.resample_seeds else "sentences"
    notes = []
    if settings.resample_seeds:
        single = [m for m, s in (("A", sa), ("B", sb)) if s == 1]
        if single:
            notes.append(f"method {' and '.join(single)} has one seed: its seed variance is not seen")
        if 2 in (sa, sb):
            notes.append("two seeds: seed variance rests on one degree of freedom")
    return SignificanceResult(score_a, score_b, d_obs, float(low), float(high), p, sa, sb, n,
                              r_total, levels, "; ".join(notes), metric.name)


def seed_bootstrap(hyps_a: Mapping[int, str | Path], hyps_b: Mapping[int, str | Path], ref_file: str | Path,
                   settings: SignificanceSettings = SignificanceSettings(),
                   metric: Metric = BLEU_METRIC) -> SignificanceResult:
    """Method A vs B on one test set: ``{seed: hypothesis file}`` per method and the reference file."""
    import numpy as np

    for name, hyps in (("A", hyps_a), ("B", hyps_b)):
        if not hyps:
            raise MarginmineError(f"method {name} has no seeds (no hypothesis files) for {ref_file}")
    refs = read_reference(ref_file)
    # every file is checked before any is scored: a bad file fails at once
    lines = [[read_hypotheses(h[s], len(refs), ref_file) for s in sorted(h)] for h in (hyps_a, hyps_b)]
    stats = [np.stack([metric.extract(x, refs) for x in method]) for method in lines]
    return seed_bootstrap_stats(stats[0], stats[1], settings, metric)


@dataclass(frozen=True)
class SeedRun:
    """One trained system's translation of one test set: ``marginmine compare``'s input row."""

    method: str
    n: str
    seed: int
    test_set: str
    hyp: str | Path
    ref: str | Path


@dataclass(frozen=True)
class SeedTableRow:
    method: str
    n: str
    test_set: str
    summary: SeedSummary
    versus: str | None = None  # the headline method this row is tested against (None: it is the headline)
    test: SignificanceResult | None = None
    chrf: SeedSummary | None = None  # chrF's summary and test, as ``summary`` and ``test`` are BLEU's
    chrf_test: SignificanceResult | None = None

    @property
    def note(self) -> str:
        """The test's note with its methods named (A is this row's method, B the headline)."""
        if self.test is None or not self.test.note:
            return ""
        return self.test.note.replace("method A", self.method).replace("method B", self.versus or "")


def seed_comparison(runs: Iterable[SeedRun], headline: str,
                    settings: SignificanceSettings = SignificanceSettings(),
                    subsets: Mapping[str, Mapping[str, Sequence[int]]] | None = None,
                    chrf: bool = True) -> list[SeedTableRow]:
    """Per (test set, N, method): mean, sd and seeds of corpus BLEU (and chrF unless ``chrf`` is False:
    ``SeedTableRow.chrf``, ``.chrf_test``, on the same bootstrap rounds), and the two-level bootstrap of the
    method against ``headline`` at the same N on the same test set (none for the headline itself, or
    where the headline has no run at that N); in each test, A is the row's method and B the headline, so
    ``diff`` > 0 means the method beats the headline. Each hypothesis file is read and scored once.

    ``subsets``: test set -> {part: 0-based line numbers}; each part gets rows of its own, named
    ``<test set>/<part>`` (e.g. the clean-mix test by clean origin), scored on those lines only."""
    import numpy as np

    from marginmine.io.sizes import parse_count

    runs = list(runs)
    if not runs:
        raise MarginmineError("no runs to compare")
    systems: dict[tuple[str, str, str], dict[int, SeedRun]] = defaultdict(dict)
    refs: dict[str, SeedRun] = {}
    for run in runs:
        key = (run.test_set, run.n, run.method)
        other = systems[key].get(run.seed)
        if other is not None:
            raise MarginmineError(f"{run.method}.{run.n} seed {run.seed} on {run.test_set} is given twice "
                                  f"({other.hyp} and {run.hyp})")
        systems[key][run.seed] = run
        first = refs.setdefault(run.test_set, run)
        if Path(first.ref).resolve() != Path(run.ref).resolve():
            raise InputError(str(run.ref), f"is the reference of {run.method}.{run.n} seed {run.seed} on "
                             f"{run.test_set}, but {first.method}.{first.n} seed {first.seed} uses "
                             f"{first.ref}",
                             hint="every system of a test set must be scored against the same reference")
    if headline not in {m for (_, _, m) in systems}:
        raise MarginmineError(f"headline method {headline!r} has no runs (methods: "
                              f"{', '.join(sorted({m for (_, _, m) in systems}))})")
    ref_lines = {t: read_reference(r.ref) for t, r in refs.items()}
    # all files are checked before any is scored
    hyps = {key: [read_hypotheses(by_seed[s].hyp, len(ref_lines[key[0]]), by_seed[s].ref)
                  for s in sorted(by_seed)] for key, by_seed in systems.items()}
    metrics = (BLEU_METRIC, CHRF_METRIC) if chrf else (BLEU_METRIC,)
    stats = {key: [np.stack([m.extract(h, ref_lines[key[0]]) for h in hs]) for m in metrics]
             for key, hs in hyps.items()}
    for test_set, parts in (subsets or {}).items():
        if test_set not in ref_lines:
            raise MarginmineError(f"subsets of {test_set!r}: no run decoded that test set "
                                  f"(sets: {', '.join(sorted(ref_lines))})")
        n_lines = len(ref_lines[test_set])
        for part, lines in parts.items():
            idx = np.asarray(sorted(lines), dtype=np.int64)
            if not len(idx) or idx[0] < 0 or idx[-1] >= n_lines:
                raise MarginmineError(f"subset {test_set}/{part}: line numbers must lie in 0..{n_lines - 1} "
                                      f"and be at least one (got {len(idx)} lines)")
            for key in [k for k in stats if k[0] == test_set]:
                sub = (f"{test_set}/{part}", key[1], key[2])
                stats[sub] = [x[:, idx] for x in stats[key]]
                systems[sub] = systems[key]
    rows = []
    order = sorted(systems, key=lambda k: (k[0], parse_count(k[1]), k[2] != headline, k[2]))
    for key in order:
        test_set, n, method = key
        seeds = sorted(systems[key])
        summaries = [summarize_seeds(dict(zip(seeds, map(float, m.score(x.sum(axis=1))))))
                     for m, x in zip(metrics, stats[key])]
        head = (test_set, n, headline)
        tested = method != headline and head in stats
        tests = [seed_bootstrap_stats(x, y, settings, m) if tested else None
                 for m, x, y in zip(metrics, stats[key], stats.get(head, [None] * len(metrics)))]
        rows.append(SeedTableRow(method, n, test_set, summaries[0], headline if tested else None, tests[0],
                                 *(summaries[1:] + tests[1:])))
    return rows


#: BLEU's columns (diff, ci_low, ci_high, p_value are BLEU's), then chrF's (empty without chrF), then the note
SEED_TABLE_HEADER = ("test_set", "method", "N", "n_seeds", "seeds", "bleu_mean", "bleu_sd", "versus",
                     "diff", "ci_low", "ci_high", "p_value", "chrf_mean", "chrf_sd", "chrf_diff", "chrf_low",
                     "chrf_high", "chrf_p", "note")


def seed_table_tsv(rows: Sequence[SeedTableRow]) -> str:
    """The rows as TSV (header :data:`SEED_TABLE_HEADER`); empty cells where a value does not apply."""
    def f(v: float | None, digits: int = 2) -> str:
        return "" if v is None else f"{v:.{digits}f}"

    lines = ["\t".join(SEED_TABLE_HEADER)]
    for r in rows:
        t, s, c, ct = r.test, r.summary, r.chrf, r.chrf_test
        cells = [r.test_set, r.method, r.n, str(s.n_seeds), ",".join(map(str, s.seeds)), f(s.mean), f(s.sd),
                 r.versus or "", f(t.diff if t else None), f(t.low if t else None), f(t.high if t else None),
                 f(t.p_value if t else None, 4), f(c.mean if c else None), f(c.sd if c else None),
                 f(ct.diff if ct else None), f(ct.low if ct else None), f(ct.high if ct else None),
                 f(ct.p_value if ct else None, 4), r.note]
        lines.append("\t".join(cells))
    return "\n".join(lines) + "\n"
