"""The scale pipeline (config/scale.yaml, `make scale`) at smoke size: a 20,000-pair scale corpus
built from the real data, the smoke run's trained DAN reused (encoder kind `trained`), one batch
through the approximate index ivf-blas, the selections and their composition. Asserts what the
5M run is judged by: the planted true translations' precision at N, and the selection's overlap with
exact search on the same batch; and that a scoring job killed inside its batch resumes from the
kNN blocks it kept, to the same bytes."""

from __future__ import annotations

import gzip
import hashlib
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from marginmine.scoring.files import read_scores
from test_workflow import CORES, copy_workflow, snakemake

PAIRS = 20_000
SIZES = ("2k", "6k")  # 10% and 30%


@pytest.fixture(scope="module")
def scale_run(smoke: Path, real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("scale") / "wf"
    d.mkdir()
    copy_workflow(d)
    overlay = {"experiment": "scale-smoke", "results_dir": "results/scale-smoke", "data_dir": str(real_data),
               "corpus": {"name": "scale-smoke", "expected_pairs": PAIRS,
                          "source": {"kind": "scale", "seed": 1234, "pairs": PAIRS,
                                     "heldout": {"dev": 1000, "test": 2000}}},
               "preprocess": {"shard_size": PAIRS, "workers": 1},
               "encoder": {"models": {"dan": {"kind": "trained",
                                              "params": {"path": str(smoke / "results/test/encoder")}}}},
               # the batch's ~18k distinct sentences would be searched exactly by auto: force the approximate index
               "scoring": {"index": "ivf-blas", "nlist": 16, "nprobe": 4},
               "selection": {"sizes": list(SIZES), "methods": ["ratio", "cosine", "random"]}}
    (d / "smoke-scale.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    r = snakemake("scoring", "--configfile", "config/scale.yaml", "smoke-scale.yaml", "--cores", CORES, cwd=d,
                  timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert "index ivf-blas, nlist 16, nprobe 4" in r.stderr  # the plan's estimate names the index
    return d


def _planted(md: str) -> dict[str, tuple[float, float]]:
    """selection -> (precision, recall) from composition.md's planted table."""
    return {m.group(1): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^\| (\S+\.\S+) \| [\d,]+ \| ([\d.]+) \| ([\d.]+) \|$", md, re.M)}


def test_the_scale_pipeline_selects_planted_translations_through_the_approximate_index(scale_run: Path) -> None:
    md = (scale_run / "results/scale-smoke/select/composition.md").read_text()
    planted = _planted(md)
    # ~6% of the corpus is planted: at 10% the ratio margin's precision is several times random's ...
    assert planted["ratio.2k"][0] > 4 * planted["random.2k"][0] and planted["ratio.2k"][0] > 0.35, planted
    # ... and at 30% it finds nearly every planted pair (its precision is bounded by their share)
    assert planted["ratio.6k"][1] > 0.8 > 0.4 > planted["random.6k"][1], planted


def test_the_approximate_selection_overlaps_exact_search_on_the_same_batch(scale_run: Path, tmp_path: Path) -> None:
    w = scale_run / "work/scale-smoke"
    shard = w / "preprocess/kept/shard0000.tsv.gz"
    approx = read_scores(w / "score/dan/shard0000.scores.tsv.gz", "ratio")
    exact_file = tmp_path / "exact.scores.tsv.gz"
    r = subprocess.run([sys.executable, "-m", "marginmine.cli", "score", "--input", str(shard), "--src-embeddings",
                        str(w / "embed/dan/shard0000.en.npy"),
                        "--tgt-embeddings", str(w / "embed/dan/shard0000.de.npy"),
                        "--scorers", '{"ratio": {"kind": "ratio"}}', "--index", "flat", "--threads", "1", "--output",
                        str(exact_file)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    exact = read_scores(exact_file, "ratio")
    assert len(exact) == len(approx) > 0.85 * PAIRS
    assert not np.array_equal(exact, approx)  # the workflow's scores did come from the approximate index
    # missed neighbours only lower the denominator: a positive score never drops
    assert np.all(approx[exact > 0] >= exact[exact > 0] - 2e-6)
    for share in (0.1, 0.3):
        n = int(share * len(exact))
        top = [set(np.lexsort((np.arange(len(s)), -s.astype(np.float64)))[:n].tolist()) for s in (exact, approx)]
        overlap = len(top[0] & top[1]) / n
        print(f"\noverlap of the top {share:.0%} with exact search: {overlap:.3f}")
        assert overlap >= 0.85


def test_a_scoring_job_killed_inside_its_batch_resumes_from_its_knn_blocks_to_the_same_bytes(
        scale_run: Path, tmp_path: Path) -> None:
    """SIGKILL while the second kNN direction is being searched (blocks of the first kept), then the
    same command again: it reads the finished blocks instead of searching them, and its score file
    is byte-identical to an uninterrupted run's."""
    w = scale_run / "work/scale-smoke"
    args = [sys.executable, "-m", "marginmine.cli", "score", "--input", str(w / "preprocess/kept/shard0000.tsv.gz"),
            "--src-embeddings", str(w / "embed/dan/shard0000.en.npy"), "--tgt-embeddings",
            str(w / "embed/dan/shard0000.de.npy"), "--scorers", '{"ratio": {"kind": "ratio"}}', "--index", "ivf-blas",
            "--nlist", "16", "--nprobe", "4", "--threads", "1", "--query-block", "500"]
    whole = tmp_path / "whole.scores.tsv.gz"
    assert subprocess.run([*args, "--output", str(whole)], capture_output=True).returncode == 0
    out = tmp_path / "killed.scores.tsv.gz"
    knn_dir = tmp_path / "killed.scores.tsv.gz.knn"
    with open(tmp_path / "killed.log", "wb") as log:
        proc = subprocess.Popen([*args, "--output", str(out)], stderr=log)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:  # once the target side has finished blocks:
            if len(list(knn_dir.glob("batch*/tgt-k4/q*.npz"))) >= 3:
                proc.send_signal(signal.SIGSTOP)  # frozen at once, then killed: no race with its last blocks
                break
            time.sleep(0.02)
        assert proc.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    kept_src = len(list(knn_dir.glob("batch*/src-k4/q*.npz")))
    kept_tgt = len(list(knn_dir.glob("batch*/tgt-k4/q*.npz")))
    assert not out.exists() and kept_src > 0 and kept_tgt >= 3
    r = subprocess.run([*args, "--output", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "every block of" in r.stderr  # the source side was read back whole, not searched again
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (whole, out)]
    assert digest[0] == digest[1]
    assert not knn_dir.exists()  # removed once the score file is complete
    with gzip.open(out, "rt") as fh:
        assert fh.readline() == "ratio\n"
