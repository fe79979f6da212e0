"""The Snakemake workflow: config validation, the planned paper DAG, conda specs, lint, and a real
preprocessing run of the smoke config on the real data."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


#: the cores a test's snakemake may use: the process's (its CPU affinity), shared by the pytest
#: workers (make test: two workers on 2 cores, 1 each). Two 2-thread jobs on 2 cores made torch's
#: threads wait for each other: the smoke suite's hard-negative DAN took 44 s alone and 143 s
#: beside the other worker
CORES = str(max(1, len(os.sched_getaffinity(0)) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
#: every core of the process: for the smoke run and the published scorers' suite, the longest chain
#: of make test (the suite waits for the smoke run). Their config (config/test.yaml, job_threads: 1)
#: keeps every job single-threaded, so two jobs run side by side where the other worker leaves a
#: core idle (the SLURM test mostly waits) and the bytes are those of a 1-core run
ALL_CORES = str(len(os.sched_getaffinity(0)))


def snakemake(*args: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def copy_workflow(dest: Path) -> None:
    """The workflow (not its results) into ``dest``, so a test runs it without touching the repo."""
    for item in ("Snakefile", "rules", "config", "envs", "docs", "profiles"):
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / item)


def job_counts(stdout: str) -> dict[str, int]:
    block = stdout.split("Job stats:")[1].split("\n\n")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


def test_paper_config_plans_the_whole_experiment() -> None:
    r = snakemake("-n", "results/bleu_10M.txt")
    assert r.returncode == 0, r.stderr[-2000:]
    counts = job_counts(r.stdout)
    # 14 shards of ~328M raw pairs, each keeping ~4.6M: one scoring batch of the paper's size per shard
    assert counts["preprocess_shard"] == 14 == counts["embed_shard"] == counts["score_shard"]
    assert "scoring estimate, encoder laser (dimension not stated: 1024 assumed): 14 job(s), each 1 batch(es) of " \
           "<= 4,590,000 pairs" in r.stderr
    assert "note: each of the" not in r.stderr
    for rule in ("download", "split_corpus", "train_encoder", "select_top", "train_nmt", "evaluate_nmt",
                 "headline_bleu"):
        assert counts.get(rule, 0) >= 1, rule
    assert "PLACEHOLDER" not in r.stdout
    # GPU steps declare it (the slurm-gpu profile turns this into --gres)
    assert re.search(r"rule score_shard:.*?resources: [^\n]*gpus=1", r.stdout, re.S)


def test_demo_config_plans_clean_mix_dev_test_seeds_and_extra_sets_per_method(real_data: Path, tmp_path: Path) -> None:
    """The demo's dev/test are the clean-mix sets the corpus build holds out; the systems are
    USE's ratio and cosine and random, two seeds each; newstest2014 (a seeded slice) is decoded
    by the scorer-based systems only, Tatoeba and Multi30k by every system; the DAN is trained with
    its random-init twin, USE (pre-trained) has no twin; the optional LASER-style encoder is not
    planned. Planned in a fresh copy, so an existing demo run does not hide jobs."""
    copy_workflow(tmp_path)
    r = snakemake("-n", "-p", "demo", "--configfile", "config/demo.yaml", "--config", f"data_dir={real_data}",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    counts = job_counts(r.stdout)
    assert counts["heldout_set"] == 2  # the Tatoeba and newstest2014 slices
    assert counts["train_encoder"] == 3 and "laser-cpu" not in r.stdout  # the DAN, its random twin, USE
    assert "--kind use-multilingual" in r.stdout and "encoders-random/use" not in r.stdout
    assert "--heldout dev=1000,test=2000 --heldout-prefix work/demo/corpus/heldout" in r.stdout
    evaluate = {m.group(1, 2): m.group(0) for m in
                re.finditer(r"marginmine evaluate --workdir \S+/nmt/([\w-]+)\.20k/seed(\d+)[^\n]*", r.stdout)}
    assert set(evaluate) == {(m, s) for m in ("use-ratio", "use-cosine", "random") for s in "12"}
    assert counts["train_nmt"] == 6
    for (method, _), cmd in evaluate.items():
        assert "--test-src work/demo/corpus/heldout.test.en" in cmd and "multi30k-flickr2016," in cmd
        assert "--dev-src work/demo/corpus/heldout.dev.en" in cmd and "tatoeba," in cmd
        assert ("newstest2014," in cmd) == (method in ("use-ratio", "use-cosine", "random")), cmd
    compare = re.search(r"marginmine compare [^\n]*", r.stdout).group(0)
    assert "--headline use-ratio" in compare and "--subsets test=work/demo/corpus/heldout.test.labels.tsv" in compare


def test_make_published_part_one_plans_rescoring_and_hard_negatives_not_translators_or_mlps(
        real_data: Path, tmp_path: Path) -> None:
    """`make published` runs its parts one after the other, so each part's wall time is its own: part
    I (the command the Makefile runs, read from `make -n published`) plans the suite's encoders and
    the Eq. 9 / Eq. 10 / hard-negative NMT systems on both training seeds, and no translator,
    translation, fitted head (MLP) or table; part II is plain `published`."""
    r = subprocess.run(["make", "-n", "published", "CORES=2"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    parts = [shlex.split(x) for x in r.stdout.splitlines() if x.startswith("bash scripts/wall_time.sh ")]
    assert [x[3] for x in parts] == ["I: rescoring, hard negatives", "II: MLP, votes, tables"]
    assert parts[1][5:] == ["published", "--configfile", "config/demo.yaml", "--cores", "2", "--printshellcmds",
                            "--rerun-incomplete", "-P", "train_nmt"] and parts[0][5:14] == parts[1][5:]
    copy_workflow(tmp_path)
    r = snakemake("-n", "-p", *parts[0][5:], "--config", f"data_dir={real_data}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    counts = job_counts(r.stdout)
    # what an NMT system waits for goes first: the hard-negative DAN before the ladder's encoders
    blocks = r.stdout.split("\n\n")
    prio = {m.group(1): ("priority: highest" in b) for b in blocks
            if (m := re.search(r"train-encoder [^\n]* --output results/demo/encoders/([\w.-]+)", b))}
    assert prio.get("dan-hn") is True and prio.get("dan-am-0.2") is False, prio
    for rule in ("translator_data", "train_translator", "translate_shard", "translate_text", "fit_scorer",
                 "score_translated", "published_eval_filter", "published_summary", "published_compare"):
        assert rule not in counts, rule
    encoders = set(re.findall(r"marginmine train-encoder [^\n]* --output results/demo/encoders?/?([\w.-]*)", r.stdout))
    assert encoders == {"", "dan-de", "dan-bide", "dan-am-0.1", "dan-am-0.2", "dan-am-0.3", "dan-am-0.4", "dan-hn",
                        "dan-aug", "use"}  # "": the demo's DAN (results/demo/encoder); use: USE's import
    trained = set(re.findall(r"--workdir \S+/nmt/([\w.-]+)\.20k/seed(\d+)", r.stdout))
    suite = {(m, s) for m in ("eq9", "eq10", "hn-ratio") for s in ("1", "2")}
    assert suite <= trained and not any(m.startswith(("mlp", "vote")) for m, _ in trained), trained
    # the suite's baselines the demo does not train (the DAN's ratio and cosine: the demo's are USE's)
    assert {(m, s) for m in ("ratio", "cosine") for s in ("1", "2")} <= trained, trained
    ratio = re.search(r"marginmine evaluate --workdir \S+/nmt/ratio\.20k/seed1[^\n]*", r.stdout).group(0)
    assert all(f"{name}," in ratio for name in ("tatoeba", "multi30k-flickr2016", "newstest2014")), ratio


def test_the_demo_and_scale_overlays_plan(real_data: Path, tmp_path: Path) -> None:
    """config/demo-distance.yaml (make demo DEMO_CONFIGS=...) adds use-distance's two systems to the
    demo's five; config/scale-use.yaml (make scale SCALE_ENCODER=use) embeds and scores the scale
    corpus with USE beside the DAN, its selections in the same composition table."""
    r = subprocess.run(["make", "-n", "demo", "DEMO_CONFIGS=config/demo.yaml config/demo-distance.yaml"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert "--configfile config/demo.yaml config/demo-distance.yaml" in r.stdout, r.stdout[-2000:]
    assert '"demo + config/demo-distance.yaml"' in r.stdout, r.stdout[-2000:]
    copy_workflow(tmp_path)
    r = snakemake("-n", "-p", "demo", "--configfile", "config/demo.yaml", "config/demo-distance.yaml", "--config",
                  f"data_dir={real_data}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    trained = set(re.findall(r"--workdir \S+/nmt/([\w.-]+)\.20k/seed(\d+)", r.stdout))
    assert trained == {(m, s) for m in ("use-ratio", "use-cosine", "use-distance", "random") for s in "12"}
    r = subprocess.run(["make", "-n", "scale", "SCALE=1m", "SCALE_ENCODER=use"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert "config/scale.yaml config/scale-1m.yaml config/scale-use.yaml" in r.stdout, r.stdout[-2000:]
    stand_in = tmp_path / "results" / "demo" / "encoder" / "encoder.json"  # the demo's DAN, as make scale needs it
    stand_in.parent.mkdir(parents=True)
    stand_in.write_text('{"dim": 320}')
    r = snakemake("-n", "-p", "preprocess", "scoring", "--configfile", "config/scale.yaml", "config/scale-1m.yaml",
                  "config/scale-use.yaml", "--config", f"data_dir={real_data}", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    assert "--kind use-multilingual" in r.stdout and "encoders-random" not in r.stdout
    assert re.search(r"marginmine embed --encoder results/scale-1m/encoders/use ", r.stdout), r.stdout[-2000:]
    composition = re.search(r"marginmine composition [^\n]*", r.stdout).group(0)
    assert all(f"select/{m}.{n}.tsv.gz" in composition  # 10% and 30% of 1M pairs
               for m in ("ratio", "cosine", "use-ratio", "use-cosine", "random") for n in ("100k", "300k")), composition


@pytest.mark.parametrize("seeds,message", [([], "nmt.seeds is empty"), ([1, 2, 1], "repeats seed(s) [1]")])
def test_an_empty_or_repeated_seed_list_is_refused_at_plan_time(seeds: list, message: str, tmp_path: Path) -> None:
    cfg = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    cfg["nmt"]["seeds"] = seeds
    (tmp_path / "seeds.yaml").write_text(yaml.safe_dump(cfg))
    r = snakemake("-n", "--configfile", str(tmp_path / "seeds.yaml"))
    assert r.returncode != 0 and message in r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]


def test_an_unknown_clean_mix_split_is_refused_at_plan_time(tmp_path: Path) -> None:
    r = snakemake("-n", "--configfile", "config/test.yaml", "--config", "eval={test: {kind: heldout, split: tset}}")
    assert r.returncode != 0 and "heldout split 'tset' is not one of corpus.source.heldout (dev, test)" in \
        r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]


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
    assert "['ratoi'] are neither selection methods nor scorers" in r.stdout + r.stderr


@pytest.mark.parametrize("thresholds,message", [
    ({"ratio": [1e-05]}, "is not written back exactly as 't1e-05'"),
    ({"ratio": [1.04, 1.0400000001]}, "is not written back exactly"),
    ({"ratoi": [1.04]}, "['ratoi'] are not scorers of this config")])
def test_selection_thresholds_are_checked_at_plan_time(thresholds: dict, message: str, tmp_path: Path) -> None:
    r = plan_demo_with(tmp_path, lambda cfg: cfg["selection"].update(thresholds=thresholds))
    assert r.returncode != 0 and message in r.stdout + r.stderr, (r.stdout + r.stderr)[-2000:]


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
    for extra in ([], ["--configfile", "config/demo.yaml"], ["--configfile", "config/scale.yaml"]):
        r = snakemake("--lint", *extra)
        assert r.returncode == 0 and "Lints for" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]


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
        cfg["selection"]["sizes"] = ["1k"]  # below the 2,000 pairs (N >= corpus.expected_pairs is refused)
        cfg["encoder"]["exclude_corpus"] = False
        m30k = {"kind": "local", "format": "parallel", "src": "multi30k/val.en.gz", "tgt": "multi30k/val.de.gz"}
        cfg["eval"]["dev"] = {**m30k, "sample": {"size": 200, "start": 0, "seed": 1}}  # no demo corpus to hold out
        cfg["eval"]["test"] = {**m30k, "sample": {"size": 300, "start": 200, "seed": 1}}
        (tmp_path / "config" / "url.yaml").write_text(yaml.safe_dump(cfg))
        r = snakemake("preprocess", "--configfile", "config/url.yaml", "--cores", CORES,
                      "--config", f"data_dir={real_data}", cwd=tmp_path)
    finally:
        server.shutdown()
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert (tmp_path / "data/downloads/corpus/pc.tsv.gz").read_bytes() == (served / "pc.tsv.gz").read_bytes()
    ledger = json.loads((tmp_path / "results/urltest/preprocess/ledger.json").read_text())
    assert ledger["pairs_in"] == 2000 and 1000 < ledger["kept"] < 2000


def test_two_spellings_of_the_data_dir_give_the_same_params(real_data: Path, tmp_path: Path) -> None:
    """`make demo` passes an absolute data_dir, a plain snakemake call the relative default: the
    params must not differ, or every rule that reads data_dir re-runs (it did, after a demo). Users
    reach their data through a symlink as often as not (`../shared` may be one): the workflow keeps
    the path as spelled, made absolute, and never resolves the link, so the relative and absolute
    spellings of one symlinked directory give the same params (and re-pointing the link to a copy of
    the same bytes changes none)."""
    link = tmp_path / "data-link"
    link.symlink_to(real_data.resolve(), target_is_directory=True)
    for spelling in (os.path.relpath(link, REPO), str(link)):
        r = snakemake("-n", "-p", "preprocess", "--configfile", "config/test.yaml", "--config",
                      f"data_dir={spelling}", "--forceall")
        assert r.returncode == 0, r.stderr[-2000:]
        cmd = re.search(r"marginmine demo-corpus [^\n]*", r.stdout).group(0)
        assert f"--data-dir {link} " in cmd, (spelling, cmd)


@pytest.mark.workflow
def test_restaged_data_reruns_a_job_only_when_its_bytes_changed(real_data: Path, tmp_path: Path) -> None:
    """The shared data is re-staged with fresh times (each session, a new copy): a job that read a
    data file re-runs only when the file's bytes changed (profiles/default, max-checksum-file-size),
    or every job after the data ran again. Control: without the workflow profile the fresh time
    alone re-runs it (the file, 5.3 MB, is above Snakemake's 1 MB default)."""
    copy_workflow(tmp_path)
    data = tmp_path / "data"
    shutil.copytree(real_data, data)
    for p in [data, *data.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    src = data / "tatoeba-manythings-deu-eng-2018" / "train.nooverlap.en"
    assert src.stat().st_size > 1_000_000  # Snakemake's default limit, or the control proves nothing
    cfg = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    cfg["eval"]["extra"]["big"] = {"kind": "local", "format": "parallel", "src": str(src.relative_to(data)),
                                   "tgt": "tatoeba-manythings-deu-eng-2018/train.nooverlap.de",
                                   "sample": {"size": 100, "start": 0, "seed": 1}}
    (tmp_path / "config" / "restaged.yaml").write_text(yaml.safe_dump(cfg))
    target = f"work/{cfg['experiment']}/eval/big.{cfg['src_lang']}"
    args = (target, "--configfile", "config/restaged.yaml", "--config", f"data_dir={data}", "--cores", CORES)
    r = snakemake(*args, cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / target).is_file(), (r.stdout + r.stderr)[-3000:]

    later = time.time() + 3600  # newer than the job's outputs, whenever the data was staged
    os.utime(src, (later, later))  # re-staged: the same bytes, a fresh time
    r = snakemake("-n", *args, cwd=tmp_path)
    assert r.returncode == 0 and "Nothing to be done" in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
    r = snakemake("-n", *args, "--workflow-profile", "none", cwd=tmp_path)
    assert f"Updated input files: {src}" in r.stdout, (r.stdout + r.stderr)[-3000:]

    with src.open("a", encoding="utf-8") as f:  # new bytes: the job runs again
        f.write("One more line.\n")
    os.utime(src, (later + 1, later + 1))
    r = snakemake("-n", *args, cwd=tmp_path)
    assert f"Updated input files: {src}" in r.stdout, (r.stdout + r.stderr)[-3000:]
