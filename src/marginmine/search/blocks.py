"""Finished blocks of one kNN search on disk, so that a killed search resumes where it stopped.

A :class:`BlockStore` is a directory holding

* ``search.json``: what the search is (query and database shapes, a digest of both and of the
  always-considered candidates, ``k``, the block size, the resolved index settings, the FAISS
  version and build and the thread count); a directory holding another search's files is emptied
  before use, never read;
* ``index.trained``: the trained (still empty) approximate index, so a resumed search skips the
  training (adding the vectors again is deterministic);
* ``q<start>.npz``: the similarities and indices of the queries ``start .. start + block``, each
  written to a temporary name and renamed, so a file that exists is whole.

A search that reads its finished blocks from here returns the same bytes as one that never stopped:
the blocks are fixed by the block size, and FAISS' result for a block depends on that block only.
The caller removes the directory once the search's results are safe elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marginmine.errors import MarginmineError


def _digest(rows: np.ndarray, chunk: int = 65_536) -> str:
    """BLAKE2b of the rows' bytes, shape and dtype (about 1 GB/s: seconds for millions of rows,
    against the minutes of the search it guards)."""
    h = hashlib.blake2b(repr((rows.shape, str(rows.dtype))).encode(), digest_size=16)
    for a in range(0, len(rows), chunk):
        h.update(np.ascontiguousarray(rows[a:a + chunk]).tobytes())
    return h.hexdigest()


@dataclass
class BlockStore:
    """The directory of one search (see the module docstring)."""

    directory: Path
    block: int
    n_queries: int

    @classmethod
    def open(cls, directory: str | Path, queries: np.ndarray, database: np.ndarray, k: int, block: int,
             spec: Any, candidates: np.ndarray | None = None) -> "BlockStore":
        """The store of this search in ``directory``: its files kept if they belong to this very
        search, else removed."""
        import faiss

        d = Path(directory)
        described = {"queries": [len(queries), int(queries.shape[1]) if queries.ndim == 2 else 0],
                     "database": [len(database), int(database.shape[1])], "k": int(k), "block": int(block),
                     "queries_digest": _digest(queries), "database_digest": _digest(database),
                     "candidates_digest": None if candidates is None else _digest(candidates),
                     "index": asdict(spec), "faiss": faiss.__version__,
                     # BLAS results may differ in the last bit with the thread count or the build
                     "threads": faiss.omp_get_max_threads(), "faiss_build": faiss.get_compile_options()}
        described = json.loads(json.dumps(described))
        meta = d / "search.json"
        if d.exists():
            try:
                same = json.loads(meta.read_text()) == described
            except (OSError, ValueError):
                same = False
            if not same:
                shutil.rmtree(d)
        d.mkdir(parents=True, exist_ok=True)
        if not meta.exists():
            tmp = meta.with_name(meta.name + ".tmp")
            tmp.write_text(json.dumps(described, indent=1, sort_keys=True) + "\n")
            os.replace(tmp, meta)
        return cls(d, block, len(queries))

    @property
    def trained_path(self) -> Path:
        return self.directory / "index.trained"

    def _path(self, start: int) -> Path:
        return self.directory / f"q{start:012d}.npz"

    def get(self, start: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The block starting at query ``start``, if it was finished."""
        path = self._path(start)
        if not path.exists():
            return None
        with np.load(path) as z:
            return z["sims"], z["ids"]

    def put(self, start: int, sims: np.ndarray, ids: np.ndarray) -> None:
        """Keep a finished block (atomically: a file that exists is whole)."""
        path = self._path(start)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, sims=sims, ids=ids)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def starts(self) -> range:
        return range(0, self.n_queries, self.block)

    def complete(self) -> bool:
        """Every block of the search is here."""
        return self.n_queries > 0 and all(self._path(s).exists() for s in self.starts())

    def gather(self) -> tuple[np.ndarray, np.ndarray]:
        """The whole search's ``(similarities, indices)`` from a complete store."""
        parts = [self.get(s) for s in self.starts()]
        if any(p is None for p in parts):
            raise MarginmineError(f"{self.directory}: not every block of the search is finished")
        return (np.concatenate([p[0] for p in parts]),  # type: ignore[index]
                np.concatenate([p[1] for p in parts]))  # type: ignore[index]
