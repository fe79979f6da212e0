"""The search floor (src/marginmine/search/): the approximate index kinds, exact re-ranking, and the
block store that lets a killed kNN search resume with the same bytes - on real sentence embeddings
(the demo's trained DAN is not needed: a fixed random projection of real sentences' character
n-gram counts gives real, clustered geometry)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from marginmine.errors import MarginmineError
from marginmine.search import knn as knn_mod
from marginmine.search.blocks import BlockStore
from marginmine.search.knn import IndexSpec, build_index, choose_index, knn, rerank, search


def _embed(lines: list[str], dim: int = 64, seed: int = 7) -> np.ndarray:
    """Unit rows from hashed character trigrams through a fixed random projection."""
    rng = np.random.default_rng(seed)
    proj = rng.standard_normal((4096, dim)).astype(np.float32)
    out = np.zeros((len(lines), dim), np.float32)
    for i, text in enumerate(lines):
        t = f"  {text.lower()}  "
        ids = [int.from_bytes(hashlib.blake2b(t[j:j + 3].encode(), digest_size=4).digest(), "little") % 4096
               for j in range(len(t) - 2)]
        out[i] = proj[ids].sum(0)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


@pytest.fixture(scope="module")
def real(real_data: Path) -> tuple[np.ndarray, np.ndarray]:
    root = real_data / "tatoeba-manythings-deu-eng-2018"
    en = (root / "train.nooverlap.en").read_text(encoding="utf-8").splitlines()[:12000]
    de = (root / "train.nooverlap.de").read_text(encoding="utf-8").splitlines()[:12000]
    return _embed(en), _embed(de)


def _same_similarities(a: np.ndarray, b: np.ndarray) -> float:
    """Share of neighbour ranks whose similarity agrees (ties make the neighbours' ids ambiguous:
    Tatoeba repeats sentences)."""
    return float(np.mean(np.abs(a - b) <= 1e-5))


def test_every_index_kind_finds_most_exact_neighbours_and_refine_makes_them_exact(real) -> None:
    x, y = real
    q = x[:2000]
    exact_s, _ = knn(q, y, 4)
    found = {}
    for kind in ("ivf", "ivf-fp16", "ivf-sq8", "ivfpq"):
        for refine in (0, 8):  # nprobe = nlist: every cell is visited, only the vectors' coding loses
            s, _ = knn(q, y, 4, spec=IndexSpec(kind=kind, nlist=64, nprobe=64, refine=refine))
            found[kind, refine] = _same_similarities(s, exact_s)
    assert min(found["ivf", 0], found["ivf", 8], found["ivf-fp16", 8], found["ivf-sq8", 8]) >= 0.999, found
    assert found["ivf-sq8", 0] < 0.9 and found["ivfpq", 0] < 0.5, found  # coded similarities are not exact
    assert found["ivfpq", 8] > found["ivfpq", 0] + 0.2, found  # ... and re-ranking finds many more
    # float16 vectors hold float16-stored embeddings exactly: all cells visited = exact search
    x16, y16 = x.astype(np.float16), y.astype(np.float16)
    e16 = knn(x16[:2000], y16, 4)
    f16 = knn(x16[:2000], y16, 4, spec=IndexSpec(kind="ivf-fp16", nlist=64, nprobe=64))
    assert _same_similarities(e16[0], f16[0]) == 1.0
    # fewer cells visited: fewer true neighbours found
    s, _ = knn(q, y, 4, spec=IndexSpec(kind="ivf", nlist=64, nprobe=2))
    assert _same_similarities(s, exact_s) < found["ivf", 0]


def test_rerank_orders_by_exact_similarity_and_breaks_ties_by_the_lower_index() -> None:
    db = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], np.float32)
    q = np.array([[1, 0]], np.float32)
    s, i = rerank(q, db, np.array([[3, 2, 1, 0, -1]]), 3)
    assert i.tolist() == [[0, 2, 3]] and np.allclose(s, [[1, 1, 0.6]])


def test_auto_is_exact_up_to_its_threshold_and_ivf_blas_beyond(real, monkeypatch) -> None:
    import faiss

    x, y = real
    assert choose_index(0) == choose_index(knn_mod.FLAT_UP_TO) == "flat"
    assert choose_index(knn_mod.FLAT_UP_TO + 1) == choose_index(knn_mod.IVF_PQ_FROM - 1) == "ivf-blas"
    assert choose_index(knn_mod.FLAT_UP_TO + 1, device="cuda") == "ivf-fp16"
    assert choose_index(knn_mod.IVF_PQ_FROM) == "ivfpq"
    assert choose_index(10 * knn_mod.IVF_PQ_FROM, "flat") == "flat"  # an explicit kind is kept
    with pytest.raises(MarginmineError, match="unknown index kind"):
        choose_index(10, "hnsw")
    assert type(build_index(y, IndexSpec(kind="auto"))) is faiss.IndexFlatIP
    monkeypatch.setattr(knn_mod, "FLAT_UP_TO", 1000)
    from marginmine.search.ivfblas import BlasIVF, blas_nlist

    spec = IndexSpec(kind="auto").resolved(len(y))
    assert (spec.kind, spec.nprobe, spec.nlist) == ("ivf-blas", knn_mod.BLAS_NPROBE, blas_nlist(len(y)))
    assert type(build_index(y, IndexSpec(kind="auto"))) is BlasIVF
    assert type(build_index(y, IndexSpec(kind="auto", device="cpu"))) is BlasIVF


@pytest.mark.parametrize("kind", ["flat", "ivf-fp16", "ivf-blas"])
def test_a_search_killed_after_some_blocks_resumes_from_its_store_with_the_same_bytes(real, tmp_path, monkeypatch,
                                                                                     kind) -> None:
    x, y = real
    spec = IndexSpec(kind=kind, nlist=64, nprobe=8)
    whole = knn(x, y, 4, block=1000, spec=spec)
    calls = {"n": 0}
    real_put = BlockStore.put

    def dying_put(self, start, sims, ids):
        if calls["n"] == 5:
            raise KeyboardInterrupt("killed")  # as SIGKILL: nothing after the 5th block is written
        calls["n"] += 1
        real_put(self, start, sims, ids)

    monkeypatch.setattr(BlockStore, "put", dying_put)
    with pytest.raises(KeyboardInterrupt):
        knn(x, y, 4, block=1000, spec=spec, scratch=tmp_path / "s")
    assert len(list((tmp_path / "s").glob("q*.npz"))) == 5
    assert (tmp_path / "s" / "index.trained").exists() == (kind != "flat")
    monkeypatch.setattr(BlockStore, "put", real_put)

    searched = []
    real_search = search

    def counting_search(index, queries, k, block=8192, **kw):
        orig = index.search
        index.search = lambda q, kk: (searched.append(len(q)), orig(q, kk))[1]
        return real_search(index, queries, k, block, **kw)

    monkeypatch.setattr(knn_mod, "search", counting_search)
    resumed = knn(x, y, 4, block=1000, spec=spec, scratch=tmp_path / "s")
    assert sum(searched) == len(x) - 5000  # the five finished blocks were read, not searched again
    assert resumed[0].tobytes() == whole[0].tobytes() and resumed[1].tobytes() == whole[1].tobytes()
    # complete: read back without building an index at all
    monkeypatch.setattr(knn_mod, "build_index", lambda *a, **k: pytest.fail("index built for a complete store"))
    again = knn(x, y, 4, block=1000, spec=spec, scratch=tmp_path / "s")
    assert again[1].tobytes() == whole[1].tobytes()


def test_a_store_of_another_search_is_emptied_not_read(real, tmp_path) -> None:
    x, y = real
    knn(x[:3000], y, 4, block=1000, scratch=tmp_path / "s")
    assert len(list((tmp_path / "s").glob("q*.npz"))) == 3
    other = x[:3000].copy()
    other[1500] = y[0]  # another query set of the same shape: its digest differs
    s, i = knn(other, y, 4, block=1000, scratch=tmp_path / "s")
    assert np.isclose(s[1500, 0], 1.0, atol=1e-5) and np.array_equal(i, knn(other, y, 4, block=1000)[1])
    s2, i2 = knn(x[:3000], y, 4, block=1000, spec=IndexSpec(kind="flat"), scratch=tmp_path / "s")
    assert np.array_equal(i2, knn(x[:3000], y, 4, block=1000)[1])


def test_partners_given_as_candidates_are_always_considered_and_bring_ivf_closer_to_exact(real) -> None:
    """A filtering search passes each sentence's partners in the batch (search/margin.py partners):
    with one cell visited of 64 the index alone misses many true neighbours; the translations
    themselves, always re-ranked with exact similarities, come back wherever they belong."""
    from marginmine.search.margin import partners

    x, y = real  # line i of x and y is a real translation pair
    n = len(x)
    gx = gy = np.arange(n)
    exact_s, exact_i = knn(x, y, 4)
    spec = IndexSpec(kind="ivf-fp16", nlist=64, nprobe=1)
    bare_s, bare_i = knn(x, y, 4, spec=spec)
    with_s, with_i = knn(x, y, 4, spec=spec, candidates=partners(gx, gy, n))
    own_exact = (exact_i == np.arange(n)[:, None]).any(1)
    own_bare = (bare_i == np.arange(n)[:, None]).any(1)
    own_with = (with_i == np.arange(n)[:, None]).any(1)
    assert own_with[own_exact].all() and own_bare[own_exact].mean() < 0.95
    assert _same_similarities(with_s, exact_s) > _same_similarities(bare_s, exact_s)
    assert np.all(with_s >= bare_s - 1e-3)  # more candidates, exactly ranked: never a worse list (float16 codes)
    # partners: each sentence's partners in line order, -1 padded, capped
    p = partners(np.array([0, 1, 0, 2, 0]), np.array([5, 6, 7, 8, 5]), 4, cap=2)
    assert p.tolist() == [[5, 7], [6, -1], [8, -1], [-1, -1]]
    # exact search ignores them (it finds them anyway): the demo's scores stay byte-identical
    assert knn(x, y, 4, candidates=partners(gx, gy, n))[1].tobytes() == exact_i.tobytes()


def test_the_cost_estimate_grows_as_the_search_does_and_the_plan_refuses_what_cannot_be_meant(tmp_path) -> None:
    from marginmine.search.cost import batch_cpu_seconds, job_estimate
    from marginmine.workflow.checks import check_scale, planned_dim

    exact = [batch_cpu_seconds(n, 320, IndexSpec(kind="flat")) for n in (10**5, 10**6)]
    assert exact[1] / exact[0] == pytest.approx(100)  # quadratic
    ivf = [batch_cpu_seconds(n, 320, IndexSpec(kind="ivf-fp16")) for n in (10**6, 4 * 10**6)]
    assert 4 < ivf[1] / ivf[0] < 12  # about n^1.5 with nlist ~ sqrt(n)
    blas = [batch_cpu_seconds(n, 320, IndexSpec(kind="ivf-blas")) for n in (10**6, 4 * 10**6)]
    assert 3.9 < blas[1] / blas[0] < 6  # cells of a fixed size: the scan per query is fixed, only the centroids grow
    assert batch_cpu_seconds(10**6, 1024, IndexSpec(kind="flat")) == pytest.approx(3.2 * exact[1])
    est = job_estimate(12_000_000, 5_000_000, 320, IndexSpec(kind="auto"))
    assert est.batches == 3 and "3 batch(es) of <= 5,000,000 pairs, index ivf-blas" in est.describe()
    # dimensions: stated, read from a reused encoder's manifest, else assumed (and said so)
    assert planned_dim({"kind": "dual", "params": {"dim": 320}}) == (320, True)
    (tmp_path / "encoder.json").write_text('{"dim": 512}')
    assert planned_dim({"kind": "trained", "params": {"path": str(tmp_path)}}) == (512, True)
    assert planned_dim({"kind": "laser-pretrained", "params": {}}) == (1024, False)
    plan = dict(expected_pairs=5_000_000, expected_keep=1.0, shard_size=5_000_000, batch_size=5_000_000,
                dims={"dan": (320, True)}, device="cpu", max_cpu_hours=24)
    lines = check_scale(sizes=["1M"], spec=IndexSpec(kind="auto"), **plan)
    assert len(lines) == 1 and lines[0].startswith("scoring estimate, encoder dan: 1 job(s)")
    with pytest.raises(MarginmineError,
                       match=r"selection.sizes: 5M \(5,000,000 pairs\) is not below corpus.expected_pairs"):
        check_scale(sizes=["1M", "5M"], spec=IndexSpec(kind="auto"), **plan)
    with pytest.raises(MarginmineError, match=r"scoring.index: flat \(exact\).*above scoring.max_cpu_hours \(24\)"):
        check_scale(sizes=["1M"], spec=IndexSpec(kind="flat"), **plan)
    assert check_scale(sizes=["1M"], spec=IndexSpec(kind="flat"), **{**plan, "device": "cuda"})  # a GPU: not refused
    # the paper's corpus: 4.59B raw pairs, 1.4% kept. Shards of 5M raw pairs keep ~70k: said, with the fix
    paper = {**plan, "expected_pairs": 4_590_000_000, "expected_keep": 0.014, "shard_size": 5_000_000}
    note, est = check_scale(sizes=["10M"], spec=IndexSpec(kind="auto"), **paper)
    assert note.startswith("note: each of the 918 shards is expected to keep about 70,000 pairs (corpus.expected_pairs "
                           "4,590,000,000 / 918 x preprocess.expected_keep 0.014)") and \
        "preprocess.shard_size about 357,142,857" in note
    assert est.startswith("scoring estimate, encoder dan: 918 job(s), each 1 batch(es) of <= 70,000 pairs")
    (est,) = check_scale(sizes=["10M"], spec=IndexSpec(kind="auto"), **{**paper, "shard_size": 330_000_000})
    assert est.startswith("scoring estimate, encoder dan: 14 job(s), each 1 batch(es) of <= 4,590,000 pairs")
    with pytest.raises(MarginmineError, match=r"selection.sizes: 100M \(100,000,000 pairs\) is not below the "
                                              r"64,260,000 pairs expected after preprocessing"):
        check_scale(sizes=["100M"], spec=IndexSpec(kind="auto"), **paper)
    # the split deals pairs evenly: 5.1M pairs in shards of 5M are two shards of 2.55M, half a batch each
    (est,) = check_scale(sizes=["1M"], spec=IndexSpec(kind="auto"), **{**plan, "expected_pairs": 5_100_000})
    assert est.startswith("scoring estimate, encoder dan: 2 job(s), each 1 batch(es) of <= 2,550,000 pairs")  # no note
    (note, _) = check_scale(sizes=["1M"], spec=IndexSpec(kind="auto"),
                            **{**plan, "expected_pairs": 5_100_000, "expected_keep": 0.9})
    assert note.startswith("note: each of the 2 shards is expected to keep about 2,295,000 pairs")
    with pytest.raises(MarginmineError, match=r"preprocess.expected_keep: 0 is not a share"):
        check_scale(sizes=["1M"], spec=IndexSpec(kind="auto"), **{**plan, "expected_keep": 0})


def test_ivf_blas_is_exact_within_the_cells_it_visits_and_deterministic(real) -> None:
    """ivf-blas (search/ivfblas.py): every cell visited = exact search; fewer cells = fewer true
    neighbours; the same bytes on a second run; never on a GPU."""
    x, y = real
    exact_s, _ = knn(x[:3000], y, 4)
    every = knn(x[:3000], y, 4, spec=IndexSpec(kind="ivf-blas", nlist=16, nprobe=16))
    assert _same_similarities(every[0], exact_s) == 1.0
    few = knn(x[:3000], y, 4, spec=IndexSpec(kind="ivf-blas", nlist=16, nprobe=2))
    assert 0.3 < _same_similarities(few[0], exact_s) < 0.99
    again = knn(x[:3000], y, 4, spec=IndexSpec(kind="ivf-blas", nlist=16, nprobe=2))
    assert again[0].tobytes() == few[0].tobytes() and again[1].tobytes() == few[1].tobytes()
    assert IndexSpec(kind="auto").resolved(300_000).kind == "ivf-blas"
    assert IndexSpec(kind="auto", device="cuda").resolved(300_000).kind == "ivf-fp16"
    with pytest.raises(MarginmineError, match="ivf-blas runs on the CPU"):
        IndexSpec(kind="ivf-blas", device="cuda").resolved(300_000)


def test_gathering_rows_from_a_memory_mapped_file_reads_it_in_chunks_with_the_same_result(tmp_path) -> None:
    from marginmine.scoring.files import gather_rows

    a = np.random.default_rng(0).standard_normal((20_003, 7)).astype(np.float16)
    np.save(tmp_path / "a.npy", a)
    m = np.load(tmp_path / "a.npy", mmap_mode="r")
    some = np.sort(np.random.default_rng(1).choice(len(a), 500, replace=False))
    for rows in (np.array([0]), np.array([len(a) - 1]), some, np.arange(len(a)), np.array([5, 3])):
        assert np.array_equal(gather_rows(m, rows, chunk=1000), a[rows])
    assert gather_rows(a, some).tobytes() == a[some].tobytes()  # an in-memory array: plain indexing
    assert np.array_equal(gather_rows(m[100:], some[some < 19_000]), a[100:][some[some < 19_000]])  # a slice
    np.save(tmp_path / "f.npy", np.asfortranarray(a))
    assert np.array_equal(gather_rows(np.load(tmp_path / "f.npy", mmap_mode="r"), some), a[some])
