"""k-nearest-neighbour search by inner product over L2-normalised embeddings (= cosine).

Exact search with FAISS ``IndexFlatIP``, queries in blocks so memory stays bounded: one block
needs ``block x len(database)`` floats of scratch. Ties are broken by the lower database index
so results are deterministic.
"""

from __future__ import annotations

import numpy as np


def knn(queries: np.ndarray, database: np.ndarray, k: int, block: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """``(similarities, indices)``, both ``(len(queries), k')`` with ``k' = min(k, len(database))``,
    best first."""
    import faiss

    q = np.ascontiguousarray(queries, dtype=np.float32)
    db = np.ascontiguousarray(database, dtype=np.float32)
    k = min(k, len(db))
    if k == 0 or len(q) == 0:
        return np.zeros((len(q), k), np.float32), np.zeros((len(q), k), np.int64)
    index = faiss.IndexFlatIP(db.shape[1])
    index.add(db)
    sims = np.empty((len(q), k), dtype=np.float32)
    ids = np.empty((len(q), k), dtype=np.int64)
    for start in range(0, len(q), block):
        s, i = index.search(q[start:start + block], k)
        sims[start:start + block], ids[start:start + block] = s, i
    return sims, ids
