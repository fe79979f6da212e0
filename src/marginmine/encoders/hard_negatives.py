"""Hard negatives for dual-encoder training (Guo et al. 2018, Sec. 2.2-2.4): with a first model,
mine for each side of each training pair the ``count`` sentences of that side's language that the
model finds closest to the other side, never the gold sentence nor one with the same text.

Rows: the training sentences are rows ``0 .. R-1`` (both sides of every pair, as the dual-encoder
trainer numbers them); ``langs[r]`` is row ``r``'s language and ``texts[r]`` its text. Each language's
pool is its distinct texts (the first row of each text represents it), so a negative is never a
duplicate of another negative. For pair ``i`` = rows ``(left[i], right[i])``:

* ``for_right[i]``: ``count`` pool rows of ``right[i]``'s language, ranked by similarity to the
  embedding of ``left[i]`` (the forward direction, x -> y);
* ``for_left[i]``: the same for ``left[i]``, queried with ``right[i]`` (used when a batch swaps sides).

Candidates whose text equals the gold text are skipped and counted (``skipped_gold`` includes
the gold row itself, ``skipped_identical`` other rows with the gold's text). A language whose pool
has fewer than ``count + 1`` distinct texts cannot give ``count`` negatives besides the gold: an
error. :func:`random_negatives` draws the "augmented random" control from the same pools.

Only the pairs that train with negatives (the ``share``, a seeded fixed subset: :func:`share_mask`)
are mined or drawn; the other pairs' rows are -1 (Guo et al. append negatives for 20% of the pairs,
so mining every pair did five times the work). The result is tied to the data
(``data_fingerprint``), the miner (``miner_sha256``) and that subset (``subset_sha256``); the trainer
refuses negatives mined on other data or by another model than its config names, and mines again
for another share or seed.

A language's pool can be capped (``pool``: at most that many distinct sentences per language, a
seeded sample of them): mining then embeds only the sampled sentences and the share's own rows,
not every training sentence - at tens of millions of training pairs, or in a short test run, the
embedding of the full pools costs more than the search. The default searches every sentence, as the
paper does; the cap is stored with the negatives, and :func:`prepare` mines again for another cap
(the trainer refuses an encoder trained with another one before that).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from marginmine.encoders.base import EncoderError


@dataclass
class Negatives:
    """``for_right``/``for_left``: ``(n_pairs, count)`` int64 rows; counts of what was skipped."""

    for_right: np.ndarray
    for_left: np.ndarray
    data_fingerprint: str
    miner_sha256: str
    kind: str = "hard"
    stats: dict[str, int] = field(default_factory=dict)
    subset_sha256: str = ""  # the pairs mined (:func:`subset_digest`); "" = every pair
    pool: int | None = None  # the per-language pool cap they were drawn from (None: every sentence)

    @property
    def count(self) -> int:
        return int(self.for_right.shape[1])

    def save(self, path: str | Path) -> None:
        from marginmine.io.safe import atomic_path

        meta = {"data_fingerprint": self.data_fingerprint, "miner_sha256": self.miner_sha256,
                "kind": self.kind, "stats": self.stats, "subset_sha256": self.subset_sha256,
                "pool": self.pool}
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, for_right=self.for_right, for_left=self.for_left, meta=np.array(json.dumps(meta)))

    @classmethod
    def load(cls, path: str | Path, data_fingerprint: str, miner_sha256: str) -> "Negatives":
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            neg = cls(z["for_right"], z["for_left"], meta["data_fingerprint"], meta["miner_sha256"], meta["kind"],
                      meta["stats"], meta.get("subset_sha256", ""), meta.get("pool"))
        if neg.data_fingerprint != data_fingerprint:
            raise EncoderError(f"{path}: negatives were mined on other training data; mine them again")
        if neg.miner_sha256 != miner_sha256:
            raise EncoderError(f"{path}: negatives were mined by another encoder than the configured miner; "
                               "mine them again")
        return neg


#: a language's pool is searched exactly up to this many sentences, with IVF-Flat beyond
EXACT_POOL_UP_TO = 2_000_000


def share_mask(n_pairs: int, share: float, seed: int) -> np.ndarray:
    """Which pairs train with negatives: a seeded, fixed subset of about ``share`` of them (the
    trainer and the miner both ask here)."""
    return np.random.default_rng([seed, 77]).random(n_pairs) < float(share)


def subset_digest(only: np.ndarray | None) -> str:
    """SHA-256 of the mined pairs' indices ("" for every pair)."""
    if only is None:
        return ""
    return hashlib.sha256(np.ascontiguousarray(only, dtype=np.int64).tobytes()).hexdigest()


def check_settings(count: int, share: float) -> None:
    if not isinstance(count, int) or count < 1:
        raise EncoderError(f"hard_negatives.count must be an integer >= 1 (got {count!r})")
    if not 0 < float(share) <= 1:
        raise EncoderError(f"hard_negatives.share must be in (0, 1] (got {share!r})")


def pools(texts: Sequence[str], langs: Sequence[str], cap: int | None = None,
          seed: int = 0) -> dict[str, np.ndarray]:
    """Per language, the first row of each distinct text (sorted rows); with ``cap``, a seeded
    sample of at most ``cap`` of them per language (the same for the same texts, cap and seed)."""
    seen: dict[tuple[str, str], int] = {}
    for r, (t, lang) in enumerate(zip(texts, langs)):
        seen.setdefault((lang, t), r)
    out: dict[str, list[int]] = {}
    for (lang, _), r in seen.items():
        out.setdefault(lang, []).append(r)
    result = {}
    for lang, rows in sorted(out.items()):
        arr = np.array(sorted(rows), dtype=np.int64)
        if cap is not None and len(arr) > cap:
            arr = np.sort(np.random.default_rng([seed, 78]).choice(arr, size=int(cap), replace=False))
        result[lang] = arr
    return result


def _check_pool_sizes(pool: dict[str, np.ndarray], count: int) -> None:
    for lang, rows in sorted(pool.items()):
        if len(rows) < count + 1:
            raise EncoderError(f"language {lang!r} has {len(rows)} distinct training sentences: too few for "
                               f"{count} negatives besides the gold one (lower hard_negatives.count)")


def mine(emb: np.ndarray, texts: Sequence[str], langs: Sequence[str], left: np.ndarray, right: np.ndarray,
         count: int, *, data_fingerprint: str, miner_sha256: str, slack: int = 8,
         block: int = 4096, progress_s: float = 30.0, only: np.ndarray | None = None,
         pool_cap: int | None = None, seed: int = 0, pool: dict[str, np.ndarray] | None = None) -> Negatives:
    """Hard negatives from row embeddings ``emb`` (unit rows, one per training sentence; only the
    pools' and the queried pairs' rows are read) for the pairs ``only`` (sorted indices; None: every
    pair; the others' rows stay -1), from pools capped at ``pool_cap`` (:func:`pools`; ``pool``: those
    pools when the caller has drawn them already, with the same cap and seed); progress is logged
    about every ``progress_s`` seconds (an exact search over each language's pool)."""
    import logging
    import time

    from marginmine.search.knn import IndexSpec, build_index, search

    log = logging.getLogger(__name__)
    check_settings(count, 1.0)
    if pool is None:
        pool = pools(texts, langs, pool_cap, seed)
    _check_pool_sizes(pool, count)
    stats = {"skipped_gold": 0, "skipped_identical": 0}
    langs_arr = np.asarray(langs)
    wanted = np.zeros(len(left), bool)
    wanted[np.arange(len(left)) if only is None else only] = True
    out = {}
    total, queried, last = 2 * int(wanted.sum()), 0, time.monotonic()
    log.info("mining %d hard negatives per side for %d of %d pairs (%d queries; pools%s: %s)", count,
             int(wanted.sum()), len(left), total, "" if pool_cap is None else f" capped at {pool_cap}",
             ", ".join(f"{lang} {len(rows)}" for lang, rows in sorted(pool.items())))
    for name, gold_rows, query_rows in (("for_right", right, left), ("for_left", left, right)):
        result = np.full((len(gold_rows), count), -1, dtype=np.int64)
        for lang, rows in sorted(pool.items()):
            todo = np.flatnonzero((langs_arr[gold_rows] == lang) & wanted)
            if not len(todo):
                continue
            kind = "flat" if len(rows) <= EXACT_POOL_UP_TO else "ivf"
            index = build_index(np.ascontiguousarray(emb[rows], dtype=np.float32), IndexSpec(kind=kind))
            for start in range(0, len(todo), block):
                if time.monotonic() - last >= progress_s:
                    log.info("mining hard negatives: %d of %d queries (%s, %s pool of %d)", queried, total, name,
                             lang, len(rows))
                    last = time.monotonic()
                part = todo[start:start + block]
                queried += len(part)
                k = min(len(rows), count + slack)
                while True:
                    _, ids = search(index, np.asarray(emb[query_rows[part]], dtype=np.float32), k)
                    done = _fill(result, part, rows[ids], gold_rows, texts, count, stats, final=k >= len(rows))
                    if done:
                        break
                    k = min(len(rows), 4 * k)
        out[name] = result
    stats["mined_pairs"] = int(wanted.sum())
    return Negatives(out["for_right"], out["for_left"], data_fingerprint, miner_sha256, "hard", stats,
                     subset_digest(only), pool_cap)


def _fill(result: np.ndarray, part: np.ndarray, cand: np.ndarray, gold_rows: np.ndarray, texts: Sequence[str],
          count: int, stats: dict[str, int], final: bool) -> bool:
    """Fill ``result[part]`` from candidate rows; False when some pair needs a wider search."""
    rows_out, local = [], {"skipped_gold": 0, "skipped_identical": 0}
    for j, i in enumerate(part):
        gold = int(gold_rows[i])
        keep = []
        for c in cand[j]:
            c = int(c)
            if c < 0:
                continue
            if c == gold:
                local["skipped_gold"] += 1
            elif texts[c] == texts[gold]:
                local["skipped_identical"] += 1
            else:
                keep.append(c)
                if len(keep) == count:
                    break
        if len(keep) < count:
            if not final:
                return False
            raise EncoderError(f"pair {i}: only {len(keep)} negatives besides the gold text in its language")
        rows_out.append(keep)
    result[part] = np.array(rows_out, dtype=np.int64)
    for k, v in local.items():
        stats[k] += v
    return True


def random_negatives(texts: Sequence[str], langs: Sequence[str], left: np.ndarray, right: np.ndarray, count: int,
                     *, seed: int, data_fingerprint: str, only: np.ndarray | None = None,
                     pool_cap: int | None = None) -> Negatives:
    """The "augmented random" control: ``count`` random pool rows per side, never the gold's text,
    for the pairs ``only`` (None: every pair; the others' rows stay -1), the pools capped as
    :func:`mine`'s."""
    pool = pools(texts, langs, pool_cap, seed)
    _check_pool_sizes(pool, count)
    rng = np.random.default_rng([seed, 31])
    langs_arr = np.asarray(langs)
    pairs = np.arange(len(left)) if only is None else np.asarray(only)
    out = {}
    for name, gold_rows in (("for_right", right), ("for_left", left)):
        result = np.full((len(gold_rows), count), -1, dtype=np.int64)
        for i in pairs:
            gold = gold_rows[i]
            rows = pool[str(langs_arr[gold])]
            keep: list[int] = []
            while len(keep) < count:
                c = int(rows[rng.integers(len(rows))])
                if texts[c] != texts[int(gold)] and c not in keep:
                    keep.append(c)
            result[i] = keep
        out[name] = result
    return Negatives(out["for_right"], out["for_left"], data_fingerprint, "random", "random",
                     {"mined_pairs": len(pairs)}, subset_digest(only), pool_cap)


SPEC_KEYS = {"count", "share", "kind", "miner", "pool"}


def resolve_spec(spec: object) -> dict[str, object] | None:
    """The ``hard_negatives`` param: ``None`` or ``{count, share, kind: hard|random, miner: DIR, pool}``."""
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise EncoderError(f"hard_negatives: a mapping {{count, share, kind, miner, pool}} (got {spec!r})")
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise EncoderError(f"hard_negatives: unknown key(s) {unknown} (known: {', '.join(sorted(SPEC_KEYS))})")
    out = {"count": spec.get("count", 5), "share": spec.get("share", 0.2), "kind": spec.get("kind", "hard"),
           "miner": spec.get("miner")}
    check_settings(out["count"], out["share"])  # type: ignore[arg-type]
    cap, count = spec.get("pool"), int(out["count"])  # type: ignore[call-overload]
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap <= count):
        raise EncoderError(f"hard_negatives.pool: at most this many distinct sentences per language to draw "
                           f"negatives from, an integer above count ({count}), or null for all (got {cap!r})")
    if cap is not None:  # (absent when unset: an encoder trained before the key existed keeps its settings)
        out["pool"] = cap
    if out["kind"] not in ("hard", "random"):
        raise EncoderError(f"hard_negatives.kind must be hard or random (the augmented-random control), "
                           f"got {out['kind']!r}")
    if out["kind"] == "hard" and not out["miner"]:
        raise EncoderError("hard_negatives.miner: the encoder directory of the first model that mines them")
    return out


def prepare(out_dir: Path, spec: dict[str, object], texts: Sequence[str], langs: Sequence[str], left: np.ndarray,
            right: np.ndarray, data_fingerprint: str, seed: int) -> Negatives:
    """Mine (or draw) the negatives of the share's pairs (:func:`share_mask`) once into
    ``out_dir/negatives.npz``; a rerun loads them (another count, share, seed or pool cap: mined again)."""
    import logging

    from marginmine.encoders.base import load_encoder, read_manifest

    log = logging.getLogger(__name__)
    path = Path(out_dir) / "negatives.npz"
    count = int(spec["count"])  # type: ignore[call-overload]
    cap = None if spec.get("pool") is None else int(spec["pool"])  # type: ignore[call-overload]
    only = np.flatnonzero(share_mask(len(left), float(spec["share"]), seed))  # type: ignore[arg-type]
    miner_sha = "random" if spec["kind"] == "random" else hashlib.sha256(json.dumps(
        read_manifest(str(spec["miner"]))["sha256"], sort_keys=True).encode()).hexdigest()  # the miner's files
    if path.exists():
        neg = Negatives.load(path, data_fingerprint, miner_sha)
        if neg.count == count and neg.subset_sha256 == subset_digest(only) and neg.pool == cap:
            return neg
        log.info("%s holds %d negatives per side for another subset of pairs or pool (%s); %d asked for "
                 "%d pairs (pool %s): mining again", path, neg.count, neg.pool, count, len(only), cap)
    if spec["kind"] == "random":
        neg = random_negatives(texts, langs, left, right, count, seed=seed, data_fingerprint=data_fingerprint,
                               only=only, pool_cap=cap)
    else:
        encoder = load_encoder(str(spec["miner"]))
        emb = np.zeros((len(texts), encoder.dim), np.float32)
        langs_arr = np.asarray(langs)
        pool = pools(texts, langs, cap, seed)
        # mine() reads only the pools' rows and the share's own rows: with a cap, only those are embedded
        need = np.ones(len(texts), bool) if cap is None else np.zeros(len(texts), bool)
        if cap is not None:
            need[np.concatenate(list(pool.values()))] = True
            need[np.asarray(left)[only]] = need[np.asarray(right)[only]] = True
            log.info("embedding %d of %d training sentences with the miner (pools capped at %d)",
                     int(need.sum()), len(texts), cap)
        for lang in sorted(set(langs)):
            rows = np.flatnonzero((langs_arr == lang) & need)
            emb[rows] = encoder.encode([texts[r] for r in rows], lang)
        neg = mine(emb, texts, langs, left, right, count, data_fingerprint=data_fingerprint,
                   miner_sha256=miner_sha, only=only, pool_cap=cap, seed=seed, pool=pool)
    log.info("negatives (%s, %d per side) for %d pairs: %s", spec["kind"], count, len(left), neg.stats)
    neg.save(path)
    return neg

