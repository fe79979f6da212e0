"""k-nearest-neighbour search by inner product over L2-normalised embeddings (= cosine).

Exact search is FAISS ``IndexFlatIP`` with queries in blocks, so scratch memory stays at
``block x len(database)`` floats; the database may be a memory-mapped ``.npy`` (float16 rows are
converted to float32 one slice at a time). Approximate search trades exactness for speed on large
databases (the kinds below); :func:`choose_index` picks one from the database size, with the
thresholds measured by ``bench/bench_index.py`` (judged by the selection the margin scores make,
docs/scale.md), and ``refine`` re-ranks a longer candidate list with exact similarities.

Index kinds: ``flat`` (exact), ``ivf-blas`` (IVF whose probed cells are scanned by matrix products,
:mod:`marginmine.search.ivfblas`: the fastest approximate search on a CPU), ``ivf`` (IVF-Flat:
float32 vectors in ``nlist`` cells, ``nprobe`` visited per query), ``ivf-fp16`` (the same with
float16 vectors: half the memory, and no loss for embeddings stored as float16), ``ivf-sq8`` (8-bit
scalar quantisation: a quarter of the memory), ``ivfpq`` (product quantisation: billions of
vectors), ``auto`` (by size).

Results are deterministic: the same inputs give bit-identical similarities and indices (FAISS
breaks ties by the lower database index; IVF training is seeded). A long search keeps every
finished block of queries in a :class:`marginmine.search.blocks.BlockStore`, with the trained
index, so a killed job resumes where it stopped and ends with the same bytes. A GPU index is only
used when asked for, and asking for one without a visible GPU fails at once.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from marginmine.defaults import BLAS_QUERY_BLOCK, INDEX_KINDS, QUERY_BLOCK, SEED
from marginmine.errors import MarginmineError
from marginmine.io.progress import Progress

log = logging.getLogger(__name__)

# the index kinds (INDEX_KINDS) and the query blocks (QUERY_BLOCK, BLAS_QUERY_BLOCK) are marginmine.defaults':
# the command line names them in its help without importing this module
#: ``auto``: exact search up to this many database vectors (inclusive) ...
FLAT_UP_TO = 200_000
#: ... IVF scanned by matrix products (``ivf-blas``; on a GPU FAISS' ``ivf-fp16``) below this
#: many, IVF-PQ from here on (compressed codes keep billions of vectors in memory)
IVF_PQ_FROM = 50_000_000
#: IVF cells visited per query when the config gives none: FAISS' IVF kinds (cells of about
#: sqrt(n) / 4 vectors) and ``ivf-blas`` (cells of about 2,048: on the scale corpus' 1M batch, 24 of
#: 407 cells keep 0.990 of exact search's top 10% at 12x less CPU; bench/bench_index_sample.py,
#: docs/scale.md)
AUTO_NPROBE = 16
BLAS_NPROBE = 24
AUTO_REFINE = 0


@dataclass(frozen=True)
class IndexSpec:
    """How to index a database: ``kind`` plus IVF/PQ settings (``nlist=0`` means from the size;
    ``nprobe=0``: the kind's default; ``refine=r > 1``: search ``r*k`` candidates and re-rank them
    with exact similarities from the database rows)."""

    kind: str = "auto"
    nlist: int = 0
    nprobe: int = 0
    pq_m: int = 0  # PQ sub-quantizers; 0: dim / 8 (8 dimensions per 1-byte code)
    refine: int = 0
    train_size: int = 262_144
    seed: int = SEED
    device: str = "cpu"
    query_block: int = 0  # queries per search block; 0: QUERY_BLOCK (BLAS_QUERY_BLOCK for ivf-blas)

    def resolved(self, n: int) -> "IndexSpec":
        """This spec for a database of ``n`` vectors: ``auto`` replaced by its choice, and the
        defaults of nlist, nprobe and refine filled in."""
        kind = choose_index(n, self.kind, self.device)
        if kind == "flat":
            return replace(self, kind="flat", nlist=0, nprobe=0, pq_m=0, refine=0)
        auto = self.kind == "auto"
        if kind == "ivf-blas":
            from marginmine.search.ivfblas import blas_nlist

            nlist, nprobe = self.nlist or blas_nlist(n), self.nprobe or BLAS_NPROBE
        else:
            nlist, nprobe = self.nlist or default_nlist(n), self.nprobe or AUTO_NPROBE
        return replace(self, kind=kind, nlist=nlist, nprobe=nprobe,
                       refine=self.refine or (AUTO_REFINE if auto else 0))


def choose_index(n: int, kind: str = "auto", device: str = "cpu") -> str:
    """The index kind for a database of ``n`` vectors: exact up to ``FLAT_UP_TO`` (inclusive),
    IVF scanned by matrix products below ``IVF_PQ_FROM`` (on a GPU: FAISS' IVF with float16
    vectors), IVF-PQ from there on."""
    if kind not in INDEX_KINDS:
        raise MarginmineError(f"unknown index kind {kind!r} (choose from {', '.join(INDEX_KINDS)})")
    if kind == "ivf-blas" and device != "cpu":
        raise MarginmineError("index ivf-blas runs on the CPU; on a GPU use flat, ivf-fp16 or auto")
    if kind != "auto":
        return kind
    if n <= FLAT_UP_TO:
        return "flat"
    if n >= IVF_PQ_FROM:
        return "ivfpq"
    return "ivf-blas" if device == "cpu" else "ivf-fp16"


def default_nlist(n: int) -> int:
    """IVF cells: about 4 sqrt(n), at least 1 and at most n / 39 (FAISS wants >= 39 training
    points per centroid)."""
    return max(1, min(int(4 * math.sqrt(n)), n // 39))


def check_device(device: str) -> None:
    """Fail loudly when a GPU is requested but FAISS cannot see one (never a silent CPU run)."""
    if device == "cpu":
        return
    if not device.startswith("cuda"):
        raise MarginmineError(f"unknown device {device!r} (use cpu or cuda)")
    import faiss

    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    if gpus == 0:
        raise MarginmineError(f"--device {device} asked for a GPU, but FAISS sees none "
                              "(install faiss-gpu-cu12 on a GPU host, or run with --device cpu)")


def _float32(rows: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rows, dtype=np.float32)


def first_nonfinite_row(rows: np.ndarray, block: int = 65_536) -> int | None:
    """Index of the first row of ``rows`` (1-D: element) holding a NaN or inf, else ``None``.

    Vectorised in blocks: a row's float64 sum is non-finite if one of its values is, so the scratch
    memory is one float per row (the rows flagged that way are then checked exactly)."""
    for a in range(0, len(rows), block):
        part = np.asarray(rows[a:a + block])
        sums = part if part.ndim == 1 else np.add.reduce(part, axis=1, dtype=np.float64)
        for i in np.flatnonzero(~np.isfinite(sums)).tolist():
            if not np.isfinite(part[i]).all():
                return a + i
    return None


def _nonfinite(what: str, row: int) -> MarginmineError:
    return MarginmineError(f"kNN search: {what} row {row} (0-based) holds NaN or inf; "
                           "the embeddings are broken (re-embed, or check the encoder)")


def _finite_float32(rows: np.ndarray, what: str, offset: int) -> np.ndarray:
    """``rows`` as contiguous float32, refusing NaN/inf (it would silently poison every neighbour list)."""
    out = _float32(rows)
    bad = first_nonfinite_row(out)
    if bad is not None:
        raise _nonfinite(what, offset + bad)
    return out


def _empty_index(kind: str, dim: int, spec: IndexSpec) -> Any:
    import faiss

    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    quantizer = faiss.IndexFlatIP(dim)
    if kind == "ivf":
        index = faiss.IndexIVFFlat(quantizer, dim, spec.nlist, faiss.METRIC_INNER_PRODUCT)
    elif kind in ("ivf-fp16", "ivf-sq8"):
        qtype = faiss.ScalarQuantizer.QT_fp16 if kind == "ivf-fp16" else faiss.ScalarQuantizer.QT_8bit
        # float16 codes of the vectors themselves (not of their residuals): float16-stored
        # embeddings are then held exactly
        index = faiss.IndexIVFScalarQuantizer(quantizer, dim, spec.nlist, qtype, faiss.METRIC_INNER_PRODUCT,
                                              kind == "ivf-sq8")
    else:
        pq_m = spec.pq_m or max(1, dim // 8)
        if dim % pq_m:
            raise MarginmineError(f"IVF-PQ: dimension {dim} is not divisible by pq_m={pq_m}")
        index = faiss.IndexIVFPQ(quantizer, dim, spec.nlist, pq_m, 8, faiss.METRIC_INNER_PRODUCT)
        # polysemous training only reorders the codes for Hamming pre-filtering, which we never
        # enable (polysemous_ht = 0): same neighbours and similarities, ~10x less training time
        index.do_polysemous_training = False
    return index


def _train(index: Any, database: np.ndarray, spec: IndexSpec) -> None:
    n = len(database)
    rng = np.random.default_rng(spec.seed)
    sample = np.sort(rng.choice(n, size=min(n, max(spec.train_size, 39 * spec.nlist)), replace=False))
    index.cp.seed = spec.seed
    log.info("training %s index: %d cells on %d of %d vectors", spec.kind, spec.nlist, len(sample), n)
    train = _float32(database[sample])
    bad = first_nonfinite_row(train)
    if bad is not None:
        raise _nonfinite("database", int(sample[bad]))
    index.train(train)


def build_index(database: np.ndarray, spec: IndexSpec = IndexSpec(), trained: Path | None = None) -> Any:
    """A FAISS inner-product index holding ``database`` (added in slices of 1M rows). With
    ``trained`` (a file path), an approximate index's training is read from there if present and
    written there otherwise (a resumed search skips it)."""
    import faiss

    check_device(spec.device)
    n, dim = database.shape
    spec = spec.resolved(n)
    if spec.kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif spec.kind == "ivf-blas":
        from marginmine.search.ivfblas import build

        bad = first_nonfinite_row(database)
        if bad is not None:
            raise _nonfinite("database", bad)
        sample = None
        if trained is None or not Path(trained).exists():
            rng = np.random.default_rng(spec.seed)
            rows = np.sort(rng.choice(n, size=min(n, max(spec.train_size, 39 * spec.nlist)), replace=False))
            sample = _finite_float32(database[rows], "database", 0)
        return build(database, spec, trained, sample)
    elif trained is not None and Path(trained).exists():
        index = faiss.read_index(str(trained))
        log.info("read the trained %s index from %s", spec.kind, trained)
    else:
        index = _empty_index(spec.kind, dim, spec)
        _train(index, database, spec)
        if trained is not None:
            tmp = Path(f"{trained}.tmp")
            faiss.write_index(index, str(tmp))
            tmp.replace(trained)
    if spec.kind != "flat":
        index.nprobe = spec.nprobe
    if spec.device.startswith("cuda"):
        res = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(res, int(spec.device.partition(":")[2] or 0), index)
    for start in range(0, n, 1_000_000):
        index.add(_finite_float32(database[start:start + 1_000_000], "database", start))
    return index


def rerank(queries: np.ndarray, database: np.ndarray, ids: np.ndarray, k: int,
           chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of each query's candidate ``ids`` by exact similarity with the database rows
    (float32 products of float32 rows; ties to the lower index; ``-1`` ids, none found, last). The
    candidates' rows are gathered ``chunk`` queries at a time (scratch ``chunk x candidates x dim``)."""
    sims = np.empty(ids.shape, np.float32)
    for a in range(0, len(ids), chunk):
        part = ids[a:a + chunk]
        rows = _float32(database[np.where(part < 0, 0, part).ravel()]).reshape(*part.shape, -1)
        sims[a:a + chunk] = np.einsum("qd,qcd->qc", queries[a:a + chunk], rows)
    sims[ids < 0] = -np.inf
    return best_k(sims, ids, k)


def best_k(sims: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` candidates of highest similarity, best first, ties to the lower index
    (``-inf`` candidates last): the order FAISS gives."""
    order = np.lexsort((ids, -sims.astype(np.float64)), axis=1)[:, :k]
    return np.take_along_axis(sims, order, 1).astype(np.float32), np.take_along_axis(ids, order, 1)


def _unique_rows(ids: np.ndarray) -> np.ndarray:
    """Each row's ids with repeats replaced by -1 (a row holds a database row at most once)."""
    srt = np.sort(ids, axis=1)
    srt[:, 1:][srt[:, 1:] == srt[:, :-1]] = -1
    return srt


def search(index: Any, queries: np.ndarray, k: int, block: int = 8192, *, database: np.ndarray | None = None,
           refine: int = 0, candidates: np.ndarray | None = None, store: Any = None,
           what: str = "kNN") -> tuple[np.ndarray, np.ndarray]:
    """``(similarities, indices)`` of the ``k`` best database rows per query, best first.

    ``refine = r > 1`` (needs ``database``): ``r*k`` candidates from the index, re-ranked exactly.
    ``candidates`` (needs ``database``): per query, database rows (``-1``: none) that are always
    considered beside the index's, all re-ranked exactly - e.g. the partners of a sentence in the
    pairs being filtered, which an approximate index may miss although they are often among its
    nearest neighbours. ``store`` (a :class:`~marginmine.search.blocks.BlockStore`): finished
    blocks are read from it and new ones written to it, so an interrupted search resumes."""
    k = min(k, index.ntotal)
    n = len(queries)
    sims = np.empty((n, k), dtype=np.float32)
    ids = np.empty((n, k), dtype=np.int64)
    if k == 0 or n == 0:
        return sims, ids
    wide = min(refine * k, index.ntotal) if refine > 1 else k
    progress = Progress(what, total=n, unit="queries", every=30.0) if n > 4 * block else None
    for start in range(0, n, block):
        done = store.get(start) if store is not None else None
        if done is None:
            q = _finite_float32(queries[start:start + block], "query", start)
            s, i = index.search(q, wide)
            if candidates is not None:
                i = _unique_rows(np.concatenate([i, candidates[start:start + block]], axis=1))
            if wide > k or candidates is not None:
                s, i = rerank(q, database, i, k)
            missing = np.flatnonzero((i < 0).any(axis=1))
            if len(missing):
                raise MarginmineError(
                    f"{what}: the index found fewer than {k} neighbours for query row {start + int(missing[0])} "
                    f"(0-based; {len(missing)} such rows in this block): the cells it visits hold too few "
                    "vectors; raise scoring.nprobe or lower scoring.nlist")
            if store is not None:
                store.put(start, s, i)
        else:
            s, i = done
        sims[start:start + block], ids[start:start + block] = s, i
        if progress is not None:
            progress.tick(len(s))
    if progress is not None:
        progress.done()
    return sims, ids


def knn(queries: np.ndarray, database: np.ndarray, k: int, block: int = QUERY_BLOCK,
        spec: IndexSpec = IndexSpec(kind="flat"), scratch: Path | None = None, what: str = "kNN",
        candidates: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(similarities, indices)``, both ``(len(queries), k')`` with ``k' = min(k, len(database))``,
    best first. Exact by default. ``scratch``: a directory that keeps the trained index and the
    finished query blocks, so a killed search resumes (its files are checked against this search).
    ``candidates``: rows always considered by an approximate index (:func:`search`); exact search
    ignores them (it finds them anyway)."""
    if len(database) == 0:
        return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
    resolved = spec.resolved(len(database))
    if resolved.kind == "flat":
        candidates = None
    if resolved.query_block:
        block = resolved.query_block
    elif resolved.kind == "ivf-blas" and block == QUERY_BLOCK:
        block = BLAS_QUERY_BLOCK
    store = None
    if scratch is not None:
        from marginmine.search.blocks import BlockStore

        store = BlockStore.open(scratch, queries, database, k, block, resolved, candidates)
        if store.complete():
            log.info("%s: every block of %d queries read from %s", what, len(queries), scratch)
            return store.gather()
    index = build_index(database, resolved, store.trained_path if store is not None else None)
    return search(index, queries, k, block, database=database, refine=resolved.refine, candidates=candidates,
                  store=store, what=what)


def recall_at_k(exact_ids: np.ndarray, approx_ids: np.ndarray) -> float:
    """Share of the exact k nearest neighbours that the approximate search also returned."""
    if exact_ids.size == 0:
        return 1.0
    hits = sum(len(np.intersect1d(e, a, assume_unique=True)) for e, a in zip(exact_ids, approx_ids))
    return hits / exact_ids.size
