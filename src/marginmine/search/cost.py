"""What a scoring batch's kNN searches cost, estimated before anything runs.

A filtering batch of ``n`` pairs searches each side's distinct sentences (at most ``n``) against the
other side's, in both directions. Counted in multiply-adds (MAC) of ``dim``-dimensional vectors:

* ``flat`` (exact): ``queries x database`` products per direction, at the BLAS rate;
* IVF kinds: training (k-means, ``KMEANS_ITERATIONS`` passes of the training sample over ``nlist``
  centroids) and adding (each vector against the centroids), both at the BLAS rate; per query the
  centroids (BLAS) and ``nprobe`` cells of about ``database / nlist`` vectors each, at the kind's
  scanning rate; ``refine`` adds ``refine x k`` exact products per query.

The rates are this project's measurements (``bench/bench_index.py`` on a 2-core AMD EPYC with AVX2,
the CPU the project first measured on; docs/scale.md): per core, so an estimate is in CPU-seconds, and the wall time
is that over the job's threads. Distinct sentences are taken to be as many as the pairs, an upper
bound (crawls repeat sentences, so real batches cost less).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from marginmine.defaults import K
from marginmine.search.knn import IndexSpec

#: multiply-adds per second and core: BLAS (exact search, k-means, centroids: FAISS IndexFlatIP on
#: 2 cores, 72e9) and scanning per index kind. ivf-blas: the 5M scale batch's scoring job alone on
#: the cores (about 7,300 queries/s in blocks of 262,144 over 8 of 1,925 cells, 320 dims: 20e9 per
#: core once the centroids' share is taken out; the job's 2,348 CPU-seconds against the 2,425
#: estimated); the FAISS IVF kinds: 1M vectors, 16 of 4,000 cells (the machine shared); ivfpq: not
#: measured here
GEMM_MAC_PER_S = 36e9
SCAN_MAC_PER_S = {"ivf-blas": 20e9, "ivf": 1.5e9, "ivf-fp16": 1.5e9, "ivf-sq8": 1.5e9, "ivfpq": 6e9}
#: FAISS' k-means passes when training an IVF index
KMEANS_ITERATIONS = 10


@dataclass(frozen=True)
class SearchCost:
    """CPU-seconds of one direction of one batch, split by what they are spent on."""

    train_s: float
    add_s: float
    query_s: float

    @property
    def total_s(self) -> float:
        return self.train_s + self.add_s + self.query_s


def search_cost(queries: int, database: int, dim: int, spec: IndexSpec, k: int = K) -> SearchCost:
    """The CPU-seconds of searching ``queries`` vectors among ``database`` with ``spec``."""
    s = spec.resolved(database)
    if s.kind == "flat":
        return SearchCost(0.0, 0.0, queries * database * dim / GEMM_MAC_PER_S)
    train = min(database, max(s.train_size, 39 * s.nlist))
    train_s = KMEANS_ITERATIONS * train * s.nlist * dim / GEMM_MAC_PER_S
    add_s = database * s.nlist * dim / GEMM_MAC_PER_S
    per_query_scan = min(s.nprobe, s.nlist) * math.ceil(database / s.nlist) * dim
    query_s = queries * (s.nlist * dim / GEMM_MAC_PER_S + per_query_scan / SCAN_MAC_PER_S[s.kind])
    if s.refine > 1:
        query_s += queries * s.refine * k * dim / GEMM_MAC_PER_S
    return SearchCost(train_s, add_s, query_s)


def batch_cpu_seconds(pairs: int, dim: int, spec: IndexSpec, k: int = K) -> float:
    """Both directions of a batch of ``pairs`` pairs (distinct sentences taken as ``pairs``)."""
    return 2 * search_cost(pairs, pairs, dim, spec, k).total_s


@dataclass(frozen=True)
class JobEstimate:
    """One scoring job: a shard of ``pairs`` pairs in ``batches`` batches."""

    pairs: int
    batch_size: int
    dim: int
    spec: IndexSpec
    batches: int
    cpu_hours_per_batch: float

    @property
    def cpu_hours(self) -> float:
        return self.batches * self.cpu_hours_per_batch

    def describe(self) -> str:
        n = min(self.batch_size, self.pairs)
        s = self.spec.resolved(n)
        how = "exact" if s.kind == "flat" else f"{s.kind}, nlist {s.nlist}, nprobe {s.nprobe}" + (
            f", refine {s.refine}" if s.refine > 1 else "")
        return (f"{self.batches} batch(es) of <= {n:,} pairs, index {how}, dim {self.dim}: about "
                f"{self.cpu_hours_per_batch:.2g} CPU-hours per batch, {self.cpu_hours:.2g} per job")


def job_estimate(shard_pairs: int, batch_size: int, dim: int, spec: IndexSpec, k: int = K) -> JobEstimate:
    """The estimate of a scoring job over a shard of ``shard_pairs`` pairs."""
    shard_pairs = max(1, shard_pairs)
    batches = math.ceil(shard_pairs / batch_size)
    per = batch_cpu_seconds(min(batch_size, shard_pairs), dim, spec, k) / 3600
    return JobEstimate(shard_pairs, batch_size, dim, spec, batches, per)
