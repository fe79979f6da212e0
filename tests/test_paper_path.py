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

from doubles import TrigramEncoder
from marginmine.search.knn import (
    FLAT_UP_TO,
    IVF_PQ_FROM,
    IndexSpec,
    build_index,
    choose_index,
    default_nlist,
    knn,
    recall_at_k,
    search,
)
from marginmine.search.margin import filter_scores

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


@pytest.fixture(autouse=True)
def _one_faiss_thread():
    """One FAISS thread: on the shared 2-core test machine OpenMP's spinning threads made these
    tests 2x slower (43 s -> 20 s measured); results depend on the thread count only in the last bits."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


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


def test_auto_index_choice_follows_the_documented_thresholds(newstest) -> None:
    """config/schema.yaml documents the thresholds users set scoring.index: auto by (the choice
    itself: tests/test_search.py)."""
    import faiss

    schema = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
    doc = schema["properties"]["scoring"]["properties"]["index"]["description"]
    assert f"exact up to {FLAT_UP_TO // 1000}k" in doc and f"ivfpq from {IVF_PQ_FROM // 10**6}M" in doc
    assert choose_index(FLAT_UP_TO) == "flat" and choose_index(FLAT_UP_TO + 1) == "ivf-blas"
    assert choose_index(IVF_PQ_FROM) == "ivfpq"
    # the real set is small -> exact search
    _, _, x, y = newstest
    assert type(build_index(y, IndexSpec(kind="auto"))) is faiss.IndexFlatIP
    assert np.array_equal(knn(x[:500], y, K, spec=IndexSpec(kind="auto"))[1], knn(x[:500], y, K)[1])


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


@pytest.mark.workflow
def test_slurm_gpu_profile_plans_the_paper_experiment_with_gpus_where_declared(tmp_path: Path) -> None:
    """``snakemake -n results/bleu_10M.txt --profile profiles/slurm-gpu`` on the paper config: the
    SLURM executor plugin validates the run (a dry run needs no sbatch), and the profile's
    settings reach every job: partition and account from default-resources, ``gres=gpu:1`` for
    every rule that declares ``gpus`` (the plugin turns only ``gres``/``gpu`` into sbatch options),
    none for CPU rules, and its printshellcmds."""
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    profile = yaml.safe_load((REPO / "profiles" / "slurm-gpu" / "config.yaml").read_text())
    assert profile["executor"] == "slurm"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    # the paper config cut to 3 shards: the same rules and resources in less planning time
    # (test_paper_config_plans_the_whole_experiment plans all 14)
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["corpus"]["expected_pairs"] = 3 * cfg["preprocess"]["shard_size"]
    small = tmp_path / "paper-3-shards.yaml"
    small.write_text(yaml.safe_dump(cfg))
    r = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-n", "results/bleu_10M.txt",
                        "--profile", "profiles/slurm-gpu", "--configfile", str(small)],
                       cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    # Snakemake names the profiles it read: profiles/slurm-gpu beside the workflow's own profiles/default
    assert re.search(r"Using profiles? profiles/slurm-gpu\b", r.stdout + r.stderr), r.stderr[-1000:]
    assert "Shell command: marginmine score " in r.stdout  # printshellcmds: true (no -p given)

    jobs = _planned_resources(r.stdout)
    by_rule: dict[str, list[dict[str, str]]] = {}
    for rule, res in jobs:
        by_rule.setdefault(rule, []).append(res)
    assert len(by_rule["score_shard"]) == len(by_rule["embed_shard"]) == 3
    # partition and account: one place, the workflow profile both SLURM profiles are read under
    defaults = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())["default-resources"]
    assert "default-resources" not in profile
    assert "default-resources" not in yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    for rule, res in jobs:
        assert res["slurm_partition"] == defaults["slurm_partition"] == "main", rule
        assert res["slurm_account"] == defaults["slurm_account"] == "marginmine", rule

    # every profile entry names a real rule (a typo would silently give no GPU)
    rules_text = "".join(p.read_text() for p in (REPO / "rules").glob("*.smk"))
    for rule in profile["set-resources"]:
        assert re.search(rf"^(rule {rule}:|use rule \w+ as {rule} with:)$", rules_text, re.M), \
            f"set-resources names no rule {rule!r}"
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


# --- test sets: sacreBLEU's archives and `marginmine extract`, from local files ---------------

NEWSTEST_YEAR = {"wmt12": "2012", "wmt13": "2013", "wmt14/full": "2014"}


def _sgm(lines: list[str], lang: str) -> str:
    """WMT's pre-2021 'fake SGML' around real sentences (one <seg> per line, as sacreBLEU reads it)."""
    segs = "".join(f'<seg id="{i}">{s}</seg>\n' for i, s in enumerate(lines, 1))
    return (f'<srcset setid="newstest" srclang="any">\n<doc sysid="ref" docid="d1" genre="news" '
            f'origlang="{lang}">\n{segs}</doc>\n</srcset>\n')


def _targz(dest: Path, members: dict[str, bytes]) -> Path:
    import io
    import tarfile

    with tarfile.open(dest, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    return dest


@pytest.fixture()
def loopback(tmp_path: Path):
    """An HTTP server on 127.0.0.1 serving ``tmp_path / "srv"``; yields (directory, base URL)."""
    import functools
    import http.server
    import threading

    served = tmp_path / "srv"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield served, f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def _point_sacrebleu_at(monkeypatch, test_set: str, url: str, md5: str | None, cache: Path) -> None:
    """sacreBLEU's own download of ``test_set`` (urllib, MD5 check, tar extraction, SGML to text),
    with only the remote location and its checksum replaced, and its cache in ``cache``."""
    from sacrebleu.dataset import DATASETS

    ds = DATASETS[test_set]
    monkeypatch.setattr(ds, "data", [url])
    monkeypatch.setattr(ds, "md5", [md5])
    monkeypatch.setattr(ds, "_outdir", str(cache / test_set))
    monkeypatch.setattr(ds, "_rawdir", str(cache / test_set / "raw"))
    monkeypatch.setattr("sacrebleu.utils.SACREBLEU_DIR", str(cache))


def _paper_sacrebleu_sets() -> list[tuple[str, str]]:
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    sources = [*cfg["eval"].values(), *(i["source"] for i in cfg.get("intrinsic", []))]
    return sorted({(s["test_set"], s["langpair"]) for s in sources if s["kind"] == "sacrebleu"})


def test_paper_config_sacrebleu_sets_are_the_local_newstest_years() -> None:
    assert _paper_sacrebleu_sets() == [("wmt12", "de-en"), ("wmt13", "en-de"), ("wmt14/full", "en-de")]


@pytest.mark.parametrize("test_set,langpair", _paper_sacrebleu_sets())
def test_fetch_testset_through_sacrebleu_archive_served_on_loopback(test_set: str, langpair: str,
                                                                    real_data: Path, tmp_path: Path, loopback,
                                                                    monkeypatch, capsys) -> None:
    """Each sacreBLEU set of the paper config, as sacreBLEU's archive layout (its DATASETS paths)
    built from the real newstest files and served on loopback: `marginmine fetch-testset` writes
    source and reference equal to the real files (up to sacreBLEU's whitespace cleaning),
    line-aligned, in the langpair's direction."""
    import hashlib

    from sacrebleu.dataset import DATASETS

    from marginmine.cli.main import main

    served, base = loopback
    year = NEWSTEST_YEAR[test_set]
    real = {lang: real_data / "wmt-newstest-ende" / f"newstest{year}.{lang}" for lang in ("en", "de")}
    paths = DATASETS[test_set].langpairs[langpair]  # [source sgm, reference sgm] inside the archive
    src_lang, tgt_lang = langpair.split("-")
    assert paths[0].endswith(f".{src_lang}.sgm") and paths[1].endswith(f".{tgt_lang}.sgm")
    members = {p: _sgm(_lines(real[lang]), lang).encode("utf-8")
               for p, lang in zip(paths, (src_lang, tgt_lang))}
    archive = _targz(served / "test.tgz", members)
    _point_sacrebleu_at(monkeypatch, test_set, f"{base}/test.tgz",
                        hashlib.md5(archive.read_bytes()).hexdigest(), tmp_path / "sacrebleu")

    out = tmp_path / "out"
    assert main(["-q", "fetch-testset", "--test-set", test_set, "--langpair", langpair,
                 "--src", str(out / "x.src"), "--ref", str(out / "x.ref")]) == 0, capsys.readouterr().err
    src, ref = (out / "x.src").read_text(encoding="utf-8"), (out / "x.ref").read_text(encoding="utf-8")
    n = {"2012": 3003, "2013": 3000, "2014": 3003}[year]
    assert src.count("\n") == ref.count("\n") == n and src.endswith("\n") and ref.endswith("\n")
    for got, lang in ((src, src_lang), (ref, tgt_lang)):
        lines = _lines(real[lang])
        # sacreBLEU collapses every Unicode whitespace run to one space (the OPUS-MT copies keep
        # no-break and thin spaces in 16 lines of 2012-2013); nothing else may differ
        assert got.split("\n")[:-1] == [re.sub(r"\s+", " ", s.strip()) for s in lines]
        changed = sum(a != b for a, b in zip(got.split("\n"), lines))
        assert changed == {("2012", "en"): 3, ("2012", "de"): 1, ("2013", "en"): 1,
                           ("2013", "de"): 11}.get((year, lang), 0)


def test_fetch_testset_failures_are_one_clear_error(real_data: Path, tmp_path: Path, loopback, monkeypatch,
                                                     capsys) -> None:
    """An unreachable server, and a served archive whose MD5 differs from sacreBLEU's table (sacreBLEU
    calls sys.exit): exit code 2, one `marginmine fetch-testset: error:` line, no output files. The
    bad archive stays in sacreBLEU's cache, so a rerun fails too until the directory the error
    names is removed; then it succeeds."""
    import hashlib
    import shutil
    import socket

    from sacrebleu.dataset import DATASETS

    from marginmine.cli.main import main

    served, base = loopback
    paths = DATASETS["wmt14/full"].langpairs["en-de"]
    d = real_data / "wmt-newstest-ende"
    archive = _targz(served / "test-full.tgz", {paths[0]: _sgm(_lines(d / "newstest2014.en"), "en").encode(),
                                                paths[1]: _sgm(_lines(d / "newstest2014.de"), "de").encode()})
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    out = tmp_path / "out"
    args = ["-q", "fetch-testset", "--test-set", "wmt14/full", "--langpair", "en-de",
            "--src", str(out / "t.src"), "--ref", str(out / "t.ref")]
    cache = tmp_path / "cache"

    def fails(url: str, expected_md5: str) -> str:
        _point_sacrebleu_at(monkeypatch, "wmt14/full", url, expected_md5, cache)
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "marginmine fetch-testset: error: sacreBLEU could not provide wmt14/full en-de" in err, err
        assert f"remove {cache / 'wmt14/full'} before retrying" in err, err
        assert not out.exists()
        return err

    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    assert "Connection refused" in fails(f"http://127.0.0.1:{closed}/test-full.tgz", md5)
    assert "exit status 1" in fails(f"{base}/test-full.tgz", "0" * 32)  # MD5 mismatch
    assert "No such file" in fails(f"{base}/test-full.tgz", md5)  # the stale archive in the cache
    shutil.rmtree(cache / "wmt14/full")
    assert main(args) == 0
    assert (out / "t.src").read_bytes() == (d / "newstest2014.en").read_bytes()
    assert (out / "t.ref").read_bytes() == (d / "newstest2014.de").read_bytes()


def test_extract_archive_members_equal_the_real_files(real_data: Path, tmp_path: Path, capsys) -> None:
    """`marginmine extract` on a Europarl-style .tgz (members nested in a folder) of real newstest
    files: by file name and by full member path, byte-identical; a missing member and a file that
    is no archive are one clear error each."""
    from marginmine.cli.main import main

    d = real_data / "wmt-newstest-ende"
    real = {f"newstest2013.{lang}": (d / f"newstest2013.{lang}").read_bytes() for lang in ("en", "de")}
    archive = _targz(tmp_path / "de-en.tgz", {f"training/nested/{n}": b for n, b in real.items()})
    assert main(["-q", "extract", "--archive", str(archive), "--member", "newstest2013.en",
                 "--output", str(tmp_path / "a" / "en")]) == 0
    assert main(["-q", "extract", "--archive", str(archive), "--member", "training/nested/newstest2013.de",
                 "--output", str(tmp_path / "a" / "de")]) == 0
    en, de = (tmp_path / "a" / "en").read_bytes(), (tmp_path / "a" / "de").read_bytes()
    assert en == real["newstest2013.en"] and de == real["newstest2013.de"]
    assert en.count(b"\n") == de.count(b"\n") == 3000
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["de", "en"]  # no .part left

    assert main(["-q", "extract", "--archive", str(archive), "--member", "newstest2013.fr",
                 "--output", str(tmp_path / "b" / "fr")]) == 2
    assert f"{archive}: has no member 'newstest2013.fr'" in capsys.readouterr().err
    assert main(["-q", "extract", "--archive", str(d / "newstest2013.en"), "--member", "x",
                 "--output", str(tmp_path / "b" / "x")]) == 2
    assert "not a readable tar archive" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
