"""IVF search whose cells are scanned with matrix products: the approximate index for CPUs.

FAISS' IVF indexes scan each probed cell vector by vector, one query at a time; on a CPU that reaches
a few 10^9 multiply-adds per second, against the 10^10 and more of a matrix product (BLAS) over the
same numbers (bench/bench_index.py, docs/scale.md). A filtering batch searches millions of queries
at once, so this index turns the scan around: the queries of a block are grouped by the cells they
probe, and each cell's vectors meet all of its queries in one product (``faiss.knn``, BLAS plus a
top-k heap), as GPU implementations do. Few, large cells (about ``CELL`` vectors each) keep the
products efficient; ``nprobe`` of them are visited per query.

Within the probed cells the similarities are exact (float32 products of the database's rows), so
the result equals an IVF-Flat search with the same centroids and ``nprobe``: it can only miss
neighbours in cells it does not visit. Each query's ``nprobe x k`` candidates are merged by
similarity, ties to the lower index.

Deterministic: k-means is seeded; a query block's result depends on that block only (the products'
shapes follow from it), so a search resumed at a block boundary ends with the same bytes.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from marginmine.errors import MarginmineError

log = logging.getLogger(__name__)

#: vectors per cell the default ``nlist`` aims at: products of a few thousand rows run near BLAS speed, and
#: at the same cost per query, smaller cells with more probes find more neighbours (docs/scale.md)
CELL = 2048
#: FAISS' k-means passes
NITER = 10


def blas_nlist(n: int) -> int:
    """Cells for ``n`` vectors: about ``CELL`` vectors each (at least 1)."""
    return max(1, round(n / CELL))


class BlasIVF:
    """An IVF index over the rows of a database whose probed cells are scanned by matrix products.

    ``train(sample)`` learns ``nlist`` centroids (spherical k-means over unit rows, seeded);
    ``add(database)`` files every row under its nearest centroid (the rows stay where they are: a
    cell is gathered from them when it is scanned, so the index holds no copy of the vectors);
    ``search(queries, k)`` returns ``(similarities, indices)`` like a FAISS index. ``save`` and
    ``load_trained`` keep the trained centroids."""

    def __init__(self, dim: int, nlist: int, nprobe: int, seed: int):
        self.d, self.nlist, self.nprobe, self.seed = dim, nlist, nprobe, seed
        self.centroids: np.ndarray | None = None
        self.ntotal = 0
        self._database: np.ndarray | None = None
        self._ids = np.zeros(0, np.int64)  # database rows ordered by cell
        self._bounds = np.zeros(nlist + 1, np.int64)  # cell c holds _ids[_bounds[c]:_bounds[c + 1]]

    def train(self, sample: np.ndarray) -> None:
        import faiss

        km = faiss.Kmeans(self.d, self.nlist, niter=NITER, seed=self.seed, spherical=True,
                          max_points_per_centroid=len(sample) // max(1, self.nlist) + 1)
        km.train(np.ascontiguousarray(sample, dtype=np.float32))
        self.centroids = np.ascontiguousarray(km.centroids, dtype=np.float32)

    def _nearest(self, rows: np.ndarray, n: int) -> np.ndarray:
        import faiss

        _, cells = faiss.knn(np.ascontiguousarray(rows, dtype=np.float32), self.centroids, n,
                             metric=faiss.METRIC_INNER_PRODUCT)
        return cells

    def add(self, database: np.ndarray, chunk: int = 262_144) -> None:
        """File every row of ``database`` (kept by reference) under its nearest centroid."""
        if self._database is not None:
            raise MarginmineError("BlasIVF.add: the database is added once, whole")
        cells = np.concatenate([self._nearest(database[a:a + chunk], 1)[:, 0]
                                for a in range(0, len(database), chunk)] or [np.zeros(0, np.int64)])
        self._ids = np.argsort(cells, kind="stable").astype(np.int64)
        self._bounds = np.searchsorted(cells[self._ids], np.arange(self.nlist + 1))
        self._database, self.ntotal = database, len(database)

    # --- search -------------------------------------------------------------------------------

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        q = np.ascontiguousarray(queries, dtype=np.float32)
        nq, nprobe = len(q), min(self.nprobe, self.nlist)
        sims = np.full((nq, nprobe * k), -np.inf, np.float32)
        ids = np.full((nq, nprobe * k), -1, np.int64)
        probe = self._nearest(q, nprobe).ravel()
        query_of = np.repeat(np.arange(nq), nprobe)
        slot_of = np.tile(np.arange(nprobe), nq)
        by_cell = np.argsort(probe, kind="stable")
        starts = np.searchsorted(probe[by_cell], np.arange(self.nlist + 1))
        for c in np.flatnonzero(np.diff(starts)).tolist():
            a, b = int(self._bounds[c]), int(self._bounds[c + 1])
            if a == b:
                continue
            sel = by_cell[starts[c]:starts[c + 1]]
            qs = query_of[sel]
            kk = min(k, b - a)
            rows = np.asarray(self._database[self._ids[a:b]], dtype=np.float32)
            d, i = faiss.knn(q[qs], rows, kk, metric=faiss.METRIC_INNER_PRODUCT)
            cols = slot_of[sel][:, None] * k + np.arange(kk)[None, :]
            sims[qs[:, None], cols] = d
            ids[qs[:, None], cols] = self._ids[a + i]
        from marginmine.search.knn import best_k

        return best_k(sims, ids, k)

    # --- persistence of the training ------------------------------------------------------------

    def save(self, path: Path) -> None:
        with open(path, "wb") as fh:
            np.save(fh, self.centroids)

    def load_trained(self, path: Path) -> None:
        self.centroids = np.load(path)
        if self.centroids.shape != (self.nlist, self.d):
            raise MarginmineError(f"{path}: centroids of shape {self.centroids.shape}, "
                                  f"expected ({self.nlist}, {self.d})")


def build(database: np.ndarray, spec: Any, trained: Path | None, sample: np.ndarray | None) -> BlasIVF:
    """A filled :class:`BlasIVF` for ``database`` (``spec`` resolved); training read from or written
    to ``trained`` when given; ``sample``: the rows to train on."""
    n, dim = database.shape
    index = BlasIVF(dim, spec.nlist, spec.nprobe, spec.seed)
    if trained is not None and Path(trained).exists():
        index.load_trained(Path(trained))
        log.info("read the trained ivf-blas centroids from %s", trained)
    else:
        log.info("training ivf-blas: %d cells on %d of %d vectors", spec.nlist, len(sample), n)
        index.train(sample)
        if trained is not None:
            tmp = Path(f"{trained}.tmp")
            index.save(tmp)
            tmp.replace(trained)
    index.add(database)
    return index
