"""Paper-path components exercised once in the default run (issue 17, item 5): IVF-PQ and the
``auto`` index choice on real sentences, with recall@k against exact search and the margin scores
both paths give.

Embeddings: the hashed character-trigram test double (``doubles.TrigramEncoder``, 64 dimensions,
non-negative like real sentence embeddings' cosines) of newstest2012-2014 en/de (9,006 real pairs);
no encoder training, so the numbers below depend on FAISS and our index settings only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from marginmine import knn as knn_mod
from marginmine.errors import MarginmineError
from marginmine.knn import (FLAT_UP_TO, IVF_PQ_FROM, IndexSpec, build_index, choose_index, default_nlist, knn,
                            recall_at_k, search)
from marginmine.margin import filter_scores

from doubles import TrigramEncoder

REPO = Path(__file__).resolve().parents[1]
K = 4
YEARS = ("2012", "2013", "2014")
# measured on the 9,006 pairs (AMD EPYC, 2 threads; seeds 1234, 1, 2): recall@4 0.179-0.191,
# exact 1-NN within the IVF-PQ top 4: 0.265-0.288, mean |PQ similarity - true cosine| 0.033-0.036.
# Random neighbours would give recall 0.0005. 8-byte PQ codes (64 dims / 8) cannot order the many
# near-ties of trigram cosines (median best cosine 0.80); IVF-Flat on the same data reaches ~0.9.
RECALL_FLOOR = 0.12
ONE_NN_FLOOR = 0.20
SIM_ERROR_CEILING = 0.06


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


@pytest.fixture(scope="module")
def newstest(real_data: Path) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    d = real_data / "wmt-newstest-ende"
    en = [s for y in YEARS for s in _lines(d / f"newstest{y}.en")]
    de = [s for y in YEARS for s in _lines(d / f"newstest{y}.de")]
    assert len(en) == len(de) == 9006
    enc = TrigramEncoder()
    return en, de, enc.encode(en, "en"), enc.encode(de, "de")


def test_ivfpq_recall_against_exact_search_on_real_sentences(newstest) -> None:
    _, _, x, y = newstest
    exact_sims, exact = knn(x, y, K)
    index = build_index(y, IndexSpec(kind="ivfpq"))
    import faiss

    assert isinstance(index, faiss.IndexIVFPQ)
    assert index.nlist == default_nlist(len(y)) == 230 and index.pq.M == 64 // 8 and index.nprobe == 16
    sims, approx = search(index, x, K)
    recall = recall_at_k(exact, approx)
    one_nn = float(np.mean([e in a for e, a in zip(exact[:, 0], approx)]))
    true_cos = np.einsum("qd,qkd->qk", x, y[approx])
    sim_error = float(np.abs(sims - true_cos).mean())
    print(f"\nIVF-PQ (nlist {index.nlist}, M {index.pq.M}, nprobe {index.nprobe}) on {len(y)} real "
          f"newstest sentences, en -> de: recall@{K} {recall:.3f}, exact 1-NN in top {K} {one_nn:.3f}, "
          f"mean |PQ sim - cos| {sim_error:.4f}")
    assert recall >= RECALL_FLOOR
    assert one_nn >= ONE_NN_FLOOR
    # the reported similarities are (approximate) cosines of the returned rows, best first
    assert sim_error <= SIM_ERROR_CEILING
    assert np.all(np.diff(sims, axis=1) <= 0)
    assert approx.min() >= 0 and approx.max() < len(y)
    # and a broken index would be caught: random neighbours score far below the floor
    rng = np.random.default_rng(0)
    assert recall_at_k(exact, rng.integers(0, len(y), approx.shape)) < RECALL_FLOOR / 10
    assert exact_sims[:, 0].mean() > true_cos[:, 0].mean() - 0.05  # the approximate best is nearly as close


def test_margin_scores_via_ivfpq_agree_with_exact(newstest) -> None:
    """The filtering mode's ratio margin through IVF-PQ neighbourhoods against exact kNN, on the
    9,006 real pairs. Measured: median |difference| 0.005-0.006 (scores 0.07-1.54, median 0.85),
    96-97% of pairs within 0.02, Spearman 0.996, the top halves share 97.4-97.6% of pairs.
    Tolerances: 90% of pairs within 0.02, median within 0.01, top halves share >= 95%."""
    en, de, x, y = newstest
    exact = filter_scores(x, y, en, de, K, ["ratio"])
    approx = filter_scores(x, y, en, de, K, ["ratio"], IndexSpec(kind="ivfpq"))
    assert np.array_equal(exact["cosine"], approx["cosine"])  # the pair's own cosine is always exact
    diff = np.abs(exact["ratio"] - approx["ratio"])
    within = float(np.mean(diff <= 0.02))
    half = len(en) // 2
    top_exact = set(np.argsort(-exact["ratio"], kind="stable")[:half].tolist())
    top_approx = set(np.argsort(-approx["ratio"], kind="stable")[:half].tolist())
    overlap = len(top_exact & top_approx) / half
    print(f"\nratio margin, IVF-PQ vs exact: median |diff| {np.median(diff):.4f}, within 0.02: {within:.3f}, "
          f"top-half overlap {overlap:.3f}")
    assert within >= 0.90
    assert np.median(diff) <= 0.01
    assert overlap >= 0.95


def test_auto_index_choice_follows_the_documented_thresholds(newstest, monkeypatch) -> None:
    import faiss

    # config/schema.yaml documents the thresholds users set scoring.index: auto by
    schema = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
    doc = schema["properties"]["scoring"]["properties"]["index"]["description"]
    assert f"exact up to {FLAT_UP_TO // 10**6}M" in doc and f"IVF-PQ from {IVF_PQ_FROM // 10**6}M" in doc
    assert (FLAT_UP_TO, IVF_PQ_FROM) == (2_000_000, 50_000_000)
    assert choose_index(0) == choose_index(9006) == choose_index(FLAT_UP_TO) == "flat"
    assert choose_index(FLAT_UP_TO + 1) == choose_index(IVF_PQ_FROM - 1) == "ivf"
    assert choose_index(IVF_PQ_FROM) == choose_index(5_000_000_000) == "ivfpq"
    for kind in ("flat", "ivf", "ivfpq"):  # an explicit kind is never overridden by the size
        assert choose_index(10 * IVF_PQ_FROM, kind) == kind
    with pytest.raises(MarginmineError, match="unknown index kind"):
        choose_index(10, "hnsw")

    # build_index routes `auto` through those thresholds: the real set is small -> exact search
    _, _, x, y = newstest
    assert type(build_index(y, IndexSpec(kind="auto"))) is faiss.IndexFlatIP
    assert np.array_equal(knn(x[:500], y, K, spec=IndexSpec(kind="auto"))[1], knn(x[:500], y, K)[1])
    # ... and with the thresholds scaled down, the same database gets IVF-Flat, then IVF-PQ
    sub = y[:3000]
    monkeypatch.setattr(knn_mod, "FLAT_UP_TO", 1000)
    monkeypatch.setattr(knn_mod, "IVF_PQ_FROM", 3000)
    assert type(build_index(sub[:2999], IndexSpec(kind="auto"))) is faiss.IndexIVFFlat
    assert type(build_index(sub, IndexSpec(kind="auto"))) is faiss.IndexIVFPQ


# --- the slurm-gpu profile -------------------------------------------------------------------


def _planned_resources(stdout: str) -> list[tuple[str, dict[str, str]]]:
    """``(rule, resources)`` of every job a ``snakemake -n`` printed."""
    jobs = []
    for block in re.split(r"\n(?=\[[^\]\n]+\]\n(?:local)?rule )", stdout):
        m = re.search(r"^(?:local)?rule (\w+):$", block, re.M)
        r = re.search(r"^\s+resources: (.*)$", block, re.M)
        if m and r:
            jobs.append((m.group(1), dict(kv.split("=", 1) for kv in r.group(1).split(", "))))
    return jobs


class _Resources(dict):
    """What the SLURM plugin reads from a job: ``resources.get(k)`` and ``resources.k``."""

    def __getattr__(self, name: str) -> str:
        return self[name]


def test_slurm_gpu_profile_plans_the_paper_experiment_with_gpus_where_declared() -> None:
    """``snakemake -n results/bleu_10M.txt --profile profiles/slurm-gpu`` on the paper config: the
    SLURM executor plugin validates the run (a dry run needs no sbatch), and the profile's
    settings reach every job: partition and account from default-resources, ``gres=gpu:1`` for
    every rule that declares ``gpus`` (the plugin turns only ``gres``/``gpu`` into sbatch options),
    none for CPU rules, and its printshellcmds."""
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    profile = yaml.safe_load((REPO / "profiles" / "slurm-gpu" / "config.yaml").read_text())
    assert profile["executor"] == "slurm"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    r = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-n", "results/bleu_10M.txt",
                        "--profile", "profiles/slurm-gpu"], cwd=REPO, capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "Using profile profiles/slurm-gpu" in r.stdout + r.stderr
    assert "Shell command: marginmine score " in r.stdout  # printshellcmds: true (no -p given)

    jobs = _planned_resources(r.stdout)
    by_rule: dict[str, list[dict[str, str]]] = {}
    for rule, res in jobs:
        by_rule.setdefault(rule, []).append(res)
    assert len(by_rule["score_shard"]) == len(by_rule["embed_shard"]) == 918
    defaults = profile["default-resources"]
    for rule, res in jobs:
        assert res["slurm_partition"] == defaults["slurm_partition"] == "main", rule
        assert res["slurm_account"] == defaults["slurm_account"] == "marginmine", rule

    # every profile entry names a real rule (a typo would silently give no GPU)
    rules_text = "".join(p.read_text() for p in (REPO / "rules").glob("*.smk"))
    for rule in profile["set-resources"]:
        assert re.search(rf"^rule {rule}:$", rules_text, re.M), f"set-resources names no rule {rule!r}"
    declares_gpu = {rule for rule, res in jobs if int(res.get("gpus", 0)) > 0}
    assert {"score_shard", "train_nmt", "evaluate_nmt"} <= declares_gpu  # paper config: device cuda
    gpu_rules = declares_gpu | {"train_encoder", "embed_shard"}
    for rule, res in jobs:
        sbatch_gres = set_gres_string(type("Job", (), {"resources": _Resources(res)})())
        if rule in gpu_rules:
            assert res.get("gres") == "gpu:1" and sbatch_gres == " --gres=gpu:1", (rule, res)
        else:
            assert "gres" not in res and sbatch_gres == "", (rule, res)
    # the rules' own `gpus` resource alone gives no GPU: that is why the profile lists them
    assert set_gres_string(type("Job", (), {"resources": _Resources({"gpus": "1"})})()) == ""
