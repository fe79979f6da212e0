"""k-nearest-neighbour search by inner product over L2-normalised embeddings (= cosine).

Exact search is FAISS ``IndexFlatIP`` with queries in blocks, so scratch memory stays at
``block x len(database)`` floats; the database may be a memory-mapped ``.npy`` (float16 rows are
converted to float32 one slice at a time). Approximate search (IVF, IVF-PQ) trades recall for
speed on large databases; :func:`choose_index` picks one from the database size, as stopes does,
and the benchmark measures the recall it gives against exact search.

Results are deterministic: the same inputs and thread count give bit-identical similarities and
indices (FAISS breaks ties by the lower database index; IVF training is seeded). A GPU index is
only used when asked for, and asking for one without a visible GPU fails at once.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from marginmine.defaults import SEED
from marginmine.errors import MarginmineError

log = logging.getLogger(__name__)

IndexKind = Literal["auto", "flat", "ivf", "ivfpq"]
INDEX_KINDS: tuple[str, ...] = ("auto", "flat", "ivf", "ivfpq")
# below this many database vectors exact search is fast enough (one GEMM per query block);
# above IVF_PQ_FROM the float32 vectors of an IVF-Flat index stop fitting comfortably in memory
FLAT_UP_TO = 2_000_000
IVF_PQ_FROM = 50_000_000


@dataclass(frozen=True)
class IndexSpec:
    """How to index a database: ``kind`` plus IVF/PQ settings (``nlist=0`` means from the size)."""

    kind: str = "auto"
    nlist: int = 0
    nprobe: int = 16
    pq_m: int = 0  # PQ sub-quantizers; 0: dim / 8 (8 dimensions per 1-byte code)
    train_size: int = 262_144
    seed: int = SEED
    device: str = "cpu"


def choose_index(n: int, kind: str = "auto") -> str:
    """The index kind for a database of ``n`` vectors: exact up to ``FLAT_UP_TO`` (inclusive),
    IVF-Flat below ``IVF_PQ_FROM``, IVF-PQ from there on (compressed codes keep billions of vectors
    in memory)."""
    if kind not in INDEX_KINDS:
        raise MarginmineError(f"unknown index kind {kind!r} (choose from {', '.join(INDEX_KINDS)})")
    if kind != "auto":
        return kind
    if n <= FLAT_UP_TO:
        return "flat"
    return "ivf" if n < IVF_PQ_FROM else "ivfpq"


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


def build_index(database: np.ndarray, spec: IndexSpec = IndexSpec()) -> Any:
    """A FAISS inner-product index holding ``database`` (added in slices of 1M rows)."""
    import faiss

    check_device(spec.device)
    n, dim = database.shape
    kind = choose_index(n, spec.kind)
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    else:
        nlist = spec.nlist or default_nlist(n)
        quantizer = faiss.IndexFlatIP(dim)
        if kind == "ivf":
            index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        else:
            pq_m = spec.pq_m or max(1, dim // 8)
            if dim % pq_m:
                raise MarginmineError(f"IVF-PQ: dimension {dim} is not divisible by pq_m={pq_m}")
            index = faiss.IndexIVFPQ(quantizer, dim, nlist, pq_m, 8, faiss.METRIC_INNER_PRODUCT)
            # polysemous training only reorders the codes for Hamming pre-filtering, which we never
            # enable (polysemous_ht = 0): same neighbours and similarities, ~10x less training time
            index.do_polysemous_training = False
        rng = np.random.default_rng(spec.seed)
        sample = np.sort(rng.choice(n, size=min(n, max(spec.train_size, 39 * nlist)), replace=False))
        index.cp.seed = spec.seed
        log.info("training %s index: %d cells on %d of %d vectors", kind, nlist, len(sample), n)
        train = _float32(database[sample])
        bad = first_nonfinite_row(train)
        if bad is not None:
            raise _nonfinite("database", int(sample[bad]))
        index.train(train)
        index.nprobe = spec.nprobe
    if spec.device.startswith("cuda"):
        res = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(res, int(spec.device.partition(":")[2] or 0), index)
    for start in range(0, n, 1_000_000):
        index.add(_finite_float32(database[start:start + 1_000_000], "database", start))
    return index


def search(index: Any, queries: np.ndarray, k: int, block: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """``(similarities, indices)`` of the ``k`` best database rows per query, best first."""
    k = min(k, index.ntotal)
    n = len(queries)
    sims = np.empty((n, k), dtype=np.float32)
    ids = np.empty((n, k), dtype=np.int64)
    if k == 0 or n == 0:
        return sims, ids
    for start in range(0, n, block):
        s, i = index.search(_finite_float32(queries[start:start + block], "query", start), k)
        sims[start:start + block], ids[start:start + block] = s, i
    return sims, ids


def knn(queries: np.ndarray, database: np.ndarray, k: int, block: int = 8192,
        spec: IndexSpec = IndexSpec(kind="flat")) -> tuple[np.ndarray, np.ndarray]:
    """``(similarities, indices)``, both ``(len(queries), k')`` with ``k' = min(k, len(database))``,
    best first. Exact by default."""
    if len(database) == 0:
        return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
    return search(build_index(database, spec), queries, k, block)


def recall_at_k(exact_ids: np.ndarray, approx_ids: np.ndarray) -> float:
    """Share of the exact k nearest neighbours that the approximate search also returned."""
    if exact_ids.size == 0:
        return 1.0
    hits = sum(len(np.intersect1d(e, a, assume_unique=True)) for e, a in zip(exact_ids, approx_ids))
    return hits / exact_ids.size
