"""The Snakemake workflow: config validation, the planned paper DAG, conda specs, lint, and a real
preprocessing run of the smoke config on the real data."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def snakemake(*args: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def copy_workflow(dest: Path) -> None:
    """The workflow (not its results) into ``dest``, so a test runs it without touching the repo."""
    for item in ("Snakefile", "rules", "config", "envs", "docs"):
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / item)


def job_counts(stdout: str) -> dict[str, int]:
    block = stdout.split("Job stats:")[1].split("\n\n")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


def test_paper_config_plans_the_whole_experiment() -> None:
    r = snakemake("-n", "results/bleu_10M.txt")
    assert r.returncode == 0, r.stderr[-2000:]
    counts = job_counts(r.stdout)
    assert counts["preprocess_shard"] == 918 == counts["embed_shard"] == counts["score_shard"]
    for rule in ("download", "split_corpus", "train_encoder", "select_top", "train_nmt", "evaluate_nmt",
                 "headline_bleu"):
        assert counts.get(rule, 0) >= 1, rule
    assert "PLACEHOLDER" not in r.stdout
    # GPU steps declare it (the slurm-gpu profile turns this into --gres)
    assert re.search(r"rule score_shard:.*?resources: [^\n]*gpus=1", r.stdout, re.S)


def test_demo_config_plans_heldout_dev_test_and_extra_sets_per_method(real_data: Path, tmp_path: Path) -> None:
    """The demo's dev/test are two slices of one Tatoeba test file; newstest2014 is decoded by the
    headline method's system only, Multi30k by every system. Planned in a fresh copy, so an
    existing demo run in the repository does not hide jobs."""
    copy_workflow(tmp_path)
    r = snakemake("-n", "-p", "demo", "--configfile", "config/demo.yaml", "--config", f"data_dir={real_data}",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    counts = job_counts(r.stdout)
    assert counts["heldout_set"] == 2
    assert "--start 0 --size 1000 --seed 1" in r.stdout and "--start 1000 --size 2000 --seed 1" in r.stdout
    evaluate = {m.group(1): m.group(0) for m in re.finditer(r"marginmine evaluate --workdir \S+/nmt/(\w+)\.\S+[^\n]*",
                                                              r.stdout)}
    assert set(evaluate) == {"ratio", "cosine", "random", "unfiltered"}
    for method, cmd in evaluate.items():
        assert "--test-src work/demo/eval/test.en" in cmd and "multi30k-flickr2016," in cmd
        assert ("newstest2014," in cmd) == (method == "ratio"), cmd


def plan_demo_with(tmp_path: Path, change: Callable[[dict], None]) -> subprocess.CompletedProcess[str]:
    """``snakemake -n`` with config/demo.yaml after ``change`` edited a copy of it."""
    cfg = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    change(cfg)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    return snakemake("-n", "--configfile", str(bad))


def test_sample_outside_eval_sets_is_refused(tmp_path: Path) -> None:
    r = plan_demo_with(tmp_path, lambda cfg: cfg["intrinsic"][0]["source"].update(sample={"size": 10}))
    assert r.returncode != 0
    assert "apply to eval sets only" in r.stdout + r.stderr


def test_extra_set_methods_must_be_selection_methods(tmp_path: Path) -> None:
    r = plan_demo_with(tmp_path, lambda cfg: cfg["eval"]["extra"]["newstest2014"].update(methods=["ratoi"]))
    assert r.returncode != 0
    assert "['ratoi'] are not selection methods" in r.stdout + r.stderr


def test_bad_config_names_the_key(tmp_path: Path) -> None:
    r = plan_demo_with(tmp_path, lambda cfg: cfg["preprocess"].update(max_ratio="two"))
    assert r.returncode != 0
    assert "max_ratio" in r.stdout + r.stderr


def test_every_conda_env_exists_and_parses() -> None:
    named = set()
    for smk in (REPO / "rules").glob("*.smk"):
        named |= set(re.findall(r'conda:\s*\n\s*"([^"]+)"', smk.read_text()))
    assert named, "rules name no conda envs"
    for rel in named:
        path = (REPO / "rules" / rel).resolve()
        assert path.is_file(), f"{rel} named by a rule does not exist"
        spec = yaml.safe_load(path.read_text())
        assert spec["dependencies"] and "channels" in spec, rel


def test_lint_is_clean() -> None:
    for extra in ([], ["--configfile", "config/demo.yaml"]):
        r = snakemake("--lint", *extra)
        assert r.returncode == 0 and "Lints for" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]


@pytest.mark.slow
@pytest.mark.workflow
@pytest.mark.slow
@pytest.mark.workflow
def test_url_source_is_downloaded_and_preprocessed(real_data: Path, tmp_path: Path) -> None:
    """A url corpus source served on loopback: download rule (sha256 checked) -> split -> preprocess."""
    import functools
    import gzip
    import hashlib
    import http.server
    import threading

    pc = real_data / "paracrawl-human-eval-en-de" / "paracrawl-v3-validation-data.sorted.en-de.tsv"
    served = tmp_path / "srv"
    served.mkdir()
    (served / "pc.tsv.gz").write_bytes(gzip.compress(pc.read_bytes(), mtime=0))
    digest = hashlib.sha256((served / "pc.tsv.gz").read_bytes()).hexdigest()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        copy_workflow(tmp_path)
        cfg = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
        cfg["experiment"] = "urltest"
        cfg["results_dir"] = "results/urltest"
        cfg["corpus"] = {"name": "pc", "expected_pairs": 2000,
                         "source": {"kind": "url", "url": f"http://127.0.0.1:{server.server_port}/pc.tsv.gz",
                                    "sha256": digest, "format": "tsv", "columns": [2, 3]}}
        cfg["preprocess"]["shard_size"] = 1000
        cfg["encoder"]["exclude_corpus"] = False
        (tmp_path / "config" / "url.yaml").write_text(yaml.safe_dump(cfg))
        r = snakemake("preprocess", "--configfile", "config/url.yaml", "--cores", "2",
                      "--config", f"data_dir={real_data}", cwd=tmp_path)
    finally:
        server.shutdown()
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert (tmp_path / "data/downloads/corpus/pc.tsv.gz").read_bytes() == (served / "pc.tsv.gz").read_bytes()
    ledger = json.loads((tmp_path / "results/urltest/preprocess/ledger.json").read_text())
    assert ledger["pairs_in"] == 2000 and 1000 < ledger["kept"] < 2000


@pytest.mark.slow
@pytest.mark.workflow
def test_smoke_config_runs_the_whole_dag(real_data: Path, tmp_path: Path) -> None:
    """config/test.yaml, raw demo corpus to bleu_2k.txt and the method comparison, in a copy of the
    workflow on the real data: preprocessing (ledger, leakage check), leakage-checked encoder data
    -> DAN -> intrinsic table -> shard embeddings -> margin scores -> top-N -> NMT -> BLEU."""
    import gzip

    import numpy as np

    copy_workflow(tmp_path)
    r = snakemake("all", "preprocess", "encoders", "results/test/comparison.tsv", "--configfile", "config/test.yaml",
                  "--cores", "2", "--config", f"data_dir={real_data}", cwd=tmp_path, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]

    # preprocessing: every input pair accounted for, no test-set overlap, one benchmark per shard job
    ledger = json.loads((tmp_path / "results/test/preprocess/ledger.json").read_text())
    corpus_lines = sum(1 for _ in gzip.open(tmp_path / "work/test/corpus/demo.tsv.gz", "rt"))
    assert ledger["pairs_in"] == corpus_lines
    steps = {s["step"]: s for s in ledger["steps"]}
    assert steps["dedup"]["removed"] > 0 and steps["langid"]["removed"] > 0
    assert 0 < ledger["kept"] < ledger["pairs_in"]
    check = json.loads((tmp_path / "results/test/preprocess/overlap_check.json").read_text())
    assert check["overlapping_pairs"] == 0
    assert len(list((tmp_path / "work/test/benchmarks/preprocess").glob("shard*.tsv"))) == 2

    # encoder: a trained DAN, far from random (99.9%), trained without dev/test or corpus sentences
    rows = (tmp_path / "results/test/encoders/intrinsic.tsv").read_text().splitlines()
    assert rows[0].startswith("encoder\tset\tmargin") and len(rows) == 1 + 4 * 2  # 4 sets x 2 margins
    tatoeba = [r.split("\t") for r in rows[1:] if "\ttatoeba-deu-eng\t" in r]
    assert all(float(r[6]) < 60 for r in tatoeba), tatoeba
    report = json.loads((tmp_path / "work/test/encoder/data/report.json").read_text())
    assert report["protected_sentences"] > 0 and report["excluded_corpus_sentences"] > 0

    # embeddings and scores: one row / one line per kept pair of each shard
    for shard in ("0000", "0001"):
        kept = sum(1 for _ in gzip.open(tmp_path / f"work/test/preprocess/kept/shard{shard}.tsv.gz", "rt"))
        emb = np.load(tmp_path / f"work/test/embed/shard{shard}.de.npy", mmap_mode="r")
        assert emb.shape == (kept, 320) and emb.dtype == np.float16
        assert np.allclose(np.linalg.norm(emb[:100].astype(np.float32), axis=1), 1, atol=1e-2)
        scores = gzip.open(tmp_path / f"work/test/score/shard{shard}.scores.tsv.gz", "rt").read().splitlines()
        assert len(scores) == kept and all(len(line.split("\t")) == 2 for line in scores)

    # selection: exactly N pairs, and the ratio selection holds the N best ratio scores
    sel = json.loads((tmp_path / "results/test/select/ratio.2k.json").read_text())
    assert sel["selected"] == 2000
    top = gzip.open(tmp_path / "work/test/select/ratio.2k.tsv.gz", "rt").read().splitlines()
    assert len(top) == 2000 and min(float(t.split("\t")[2]) for t in top) >= sel["threshold"]

    # NMT + BLEU: every test line decoded, the number first, then sacreBLEU's signature
    bleu = (tmp_path / "results/test/bleu_2k.txt").read_text().splitlines()
    assert re.fullmatch(r"\d+\.\d\d", bleu[0]) and any("nrefs:1|case:mixed" in line for line in bleu)
    hyp = tmp_path / "results/test/nmt/ratio.2k/bleu.hyp/test.de"
    ref_lines = sum(1 for _ in gzip.open(real_data / "multi30k/test_2016_flickr.de.gz", "rt"))
    assert sum(1 for _ in hyp.open()) == ref_lines == 1000
    table = (tmp_path / "results/test/comparison.tsv").read_text().splitlines()
    assert table[0].startswith("method\tN\tpairs\tdev_bleu\ttest_bleu") and len(table) == 3
