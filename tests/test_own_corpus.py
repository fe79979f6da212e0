"""The own-corpus template (config/own-corpus.yaml) end to end, as a user runs it: a corpus of a few
thousand real pairs written here (Multi30k pairs and misaligned ones, in a TSV whose sentence
columns are not the first), a pre-trained encoder (a sentence-transformers model built here:
no download), to BLEU and the filtered corpus in the formats it travels in."""

from __future__ import annotations

import gzip
import hashlib
import re
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import yaml

from marginmine.scoring.files import read_scores
from test_sentence_transformers import build_model
from test_workflow import CORES, copy_workflow, snakemake

N_CLEAN, N_NOISE, N = 2500, 800, 1000


def lines(path, n, start=0):
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        out = [" ".join(unicodedata.normalize("NFC", x).split()) for x in fh.read().splitlines()]
    return out[start:start + n]


def write_user_files(data, real_data):
    """What a user brings: corpus.tsv.gz (id, en, de, origin; sentences in columns 1 and 2), dev, test."""
    m = real_data / "multi30k"
    en, de = lines(m / "train.en.gz", N_CLEAN + N_NOISE + 1), lines(m / "train.de.gz", N_CLEAN + N_NOISE + 1)
    rows = [(f"id{i}", en[i], de[i], "clean") for i in range(N_CLEAN)]
    rows += [(f"id{i}", en[i], de[i + 1], "misaligned") for i in range(N_CLEAN, N_CLEAN + N_NOISE)]
    with gzip.open(data / "corpus.tsv.gz", "wt", encoding="utf-8") as fh:
        fh.writelines("\t".join(r) + "\n" for r in rows)
    for name, src, n in (("dev", "val", 200), ("test", "test_2016_flickr", 200)):
        for lang in ("en", "de"):
            (data / f"{name}.{lang}").write_text("\n".join(lines(m / f"{src}.{lang}.gz", n)) + "\n", encoding="utf-8")
    return rows


def user_setup(tmp_path, real_data):
    """The workflow copied into tmp_path/wf, the user's files in tmp_path/my-data, and the user's
    edits of the template that point at them (data_dir, their corpus' columns and size)."""
    d, data = tmp_path / "wf", tmp_path / "my-data"
    d.mkdir()
    data.mkdir()
    copy_workflow(d)
    rows = write_user_files(data, real_data)
    overlay = {"data_dir": str(data),
               "corpus": {"name": "mine", "source": {"kind": "local", "format": "tsv", "path": "corpus.tsv.gz",
                                                     "columns": [1, 2]}, "expected_pairs": len(rows)}}
    return d, rows, overlay


def laser2_files(data, overlay, pins=None):
    """Stand-ins for the released LASER2 files in <data_dir>/models/ (the plan reads no checkpoint:
    it checks that each file is there and pinned), pinned in the overlay as a user pins them."""
    (data / "models").mkdir(exist_ok=True)
    digests = {}
    for key, name in (("model", "laser2.pt"), ("spm", "laser2.spm"), ("cvocab", "laser2.cvocab")):
        (data / "models" / name).write_bytes(f"stand-in for {name}\n".encode())
        digests[key] = hashlib.sha256((data / "models" / name).read_bytes()).hexdigest()
    overlay["encoder"] = {"models": {"laser2": {"params": {"sha256": {**digests, **(pins or {})}}}}}
    return digests


def test_own_corpus_template_to_bleu_and_filtered_tsv(tmp_path, real_data):
    d, rows, overlay = user_setup(tmp_path, real_data)
    # the user's data reached through a symlink, the model inside it named relative to data_dir
    (tmp_path / "linked-data").symlink_to(tmp_path / "my-data", target_is_directory=True)
    overlay["data_dir"] = str(tmp_path / "linked-data")
    build_model(tmp_path / "my-data" / "models" / "st", [s for r in rows[:500] for s in r[1:3]])
    # the user's further edits: their encoder, a small NMT
    overlay |= {
        "encoder": {"default": "st", "models": {"st": {"kind": "sentence-transformers",
                                                       "params": {"path": "models/st/model", "langs": ["en", "de"]}}}},
        "selection": {"sizes": ["1k"], "methods": ["ratio"]},  # one NMT system keeps make test in its time
        "nmt": {"seeds": [1], "max_minutes": 20, "beam": 2, "mem_mb": 2000,
                "params": {"encoder_layers": 1, "decoder_layers": 1, "encoder_embed_dim": 64,
                           "decoder_embed_dim": 64, "encoder_ffn_embed_dim": 128, "decoder_ffn_embed_dim": 128,
                           "encoder_attention_heads": 2, "decoder_attention_heads": 2, "bpe_vocab": 800,
                           "max_epoch": 2, "lr": 0.003, "warmup_updates": 10, "max_tokens": 4096}},
    }
    (d / "mine.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    r = snakemake("filtered", "nmt", "--configfile", "config/own-corpus.yaml", "mine.yaml", "--cores", CORES,
                  cwd=d, timeout=1200)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    res = d / "results/my-corpus"

    # BLEU of NMT on the ratio selection (the tables a user reads first)
    bleu = (res / "bleu_1k.txt").read_text(encoding="utf-8")
    assert "ratio.1k: test sacreBLEU" in bleu and "seed 1:" in bleu, bleu
    comparison = (res / "comparison.md").read_text(encoding="utf-8")
    assert re.search(r"^\| ratio \| 1k \| 1 \|", comparison, re.M), comparison

    # the filtered TSV: the user's own lines (columns in their order), the score appended
    by_id = {row[0]: row for row in rows}
    with gzip.open(res / "filtered/ratio.1k.tsv.gz", "rt", encoding="utf-8") as fh:
        out = [line.rstrip("\n").split("\t") for line in fh]
    assert len(out) == N
    assert all(len(cols) == 5 and tuple(cols[:4]) == by_id[cols[0]] for cols in out)
    kept = np.array([float(cols[4]) for cols in out])
    # ... the N best ratio scores of the whole corpus
    scores = read_scores(d / "work/my-corpus/score/st/shard0000.scores.tsv.gz", "ratio")
    assert kept.min() >= np.sort(scores)[-N] - 1e-6
    # ... and the same pairs as aligned text
    for col, lang in ((1, "en"), (2, "de")):
        with gzip.open(res / f"filtered/ratio.1k.{lang}.gz", "rt", encoding="utf-8") as fh:
            assert fh.read().splitlines() == [cols[col] for cols in out]


def test_the_template_as_shipped_is_refused_at_plan_time_naming_the_key(tmp_path, real_data):
    """Issue 46: what the LASER2 import would refuse fails `snakemake -n` before any job, one
    message naming the key: the model files missing (read under data_dir), the template's
    placeholder pins, a pin that is not the file's, a language of the corpus the encoder lacks."""
    d, _, overlay = user_setup(tmp_path, real_data)
    data = tmp_path / "my-data"

    def plan(edit=None):
        (d / "mine.yaml").write_text(yaml.safe_dump(edit or overlay), encoding="utf-8")
        r = snakemake("-n", "filtered", "--configfile", "config/own-corpus.yaml", "mine.yaml", cwd=d)
        return r.returncode, r.stdout + r.stderr

    rc, out = plan()
    assert rc != 0 and (f"encoder.models.laser2: laser-pretrained params.model: {data}/models/laser2.pt not found "
                        "(relative paths in a config are read under data_dir") in out, out[-2000:]
    laser2_files(data, {})
    rc, out = plan()
    assert rc != 0 and ("encoder.models.laser2: laser-pretrained params.sha256.model: "
                        "'PUT-THE-SHA256-OF-laser2.pt-HERE' is not a SHA-256 (64 hex digits)") in out, out[-2000:]
    laser2_files(data, overlay, pins={"spm": "ab" * 32})
    rc, out = plan()
    assert rc != 0 and f"{data}/models/laser2.spm: SHA-256 " in out and "differs from params.sha256.spm abab" in out
    laser2_files(data, overlay)
    rc, out = plan()
    assert rc == 0, out[-2000:]
    overlay["encoder"]["models"]["laser2"]["params"]["langs"] = ["en", "fr"]
    rc, out = plan()
    assert rc != 0 and "encoder.models.laser2.params.langs: ['en', 'fr'] lacks de, a language of the corpus" in out


def test_template_plans_pretrained_files_given_by_url(tmp_path, real_data):
    """A pre-trained file given as {url, sha256}: the plan downloads it (digest checked) and the
    import reads the download with the same pin; a url without its sha256 is refused at plan time."""
    d, _, overlay = user_setup(tmp_path, real_data)
    digest = "ab" * 32
    overlay["encoder"] = {"models": {"laser2": {"params": {
        "model": {"url": "file:///models/laser2.pt", "sha256": digest}}}}}
    overlay["selection"] = {"sizes": ["1k"]}
    (d / "mine.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    r = snakemake("-n", "-p", "filtered", "nmt", "--configfile", "config/own-corpus.yaml", "mine.yaml", cwd=d)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    plan = r.stdout
    assert ("marginmine download --url file:///models/laser2.pt "
            f"--output data/downloads/encoder-laser2-model/laser2.pt --sha256 {digest}") in plan
    train = next(line for line in plan.splitlines() if "marginmine train-encoder" in line)
    assert "--kind laser-pretrained" in train and '"model": "data/downloads/encoder-laser2-model/laser2.pt"' in train
    assert f'"model": "{digest}"' in train  # the import checks the same pin
    assert "export-filtered" in plan and "--columns 1,2" in plan
    overlay["encoder"]["models"]["laser2"]["params"]["model"] = {"url": "file:///models/laser2.pt"}
    (d / "mine.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    r = snakemake("-n", "filtered", "--configfile", "config/own-corpus.yaml", "mine.yaml", cwd=d)
    assert r.returncode != 0 and "encoder.models.laser2.params.model: a url needs its sha256" in r.stdout + r.stderr


def test_template_plans_the_offline_encoder_with_no_model_file(tmp_path, real_data):
    """default: usem - Google's multilingual USE v3, whose weights come with make setup: the plan
    imports it (kind use-multilingual, the template's languages), downloads nothing and needs no file
    of the user's; its 512 dimensions are known at plan time."""
    d, _, overlay = user_setup(tmp_path, real_data)
    overlay["encoder"] = {"default": "usem"}
    overlay["selection"] = {"sizes": ["1k"]}
    (d / "mine.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
    r = snakemake("-n", "-p", "filtered", "nmt", "--configfile", "config/own-corpus.yaml", "mine.yaml", cwd=d)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    train = next(line for line in r.stdout.splitlines() if "marginmine train-encoder" in line)
    assert "--kind use-multilingual" in train and '"langs": ["en", "de"]' in train
    assert "marginmine download" not in r.stdout and "dim 512" in r.stdout + r.stderr


def test_template_plans_a_5M_corpus_with_its_scoring_estimate_and_refuses_what_cannot_be_meant(tmp_path, real_data):
    """Issue 32: the template, with only the corpus changed, plans a 5M-pair corpus on a CPU with an
    approximate index and prints each scoring job's estimate; it refuses N >= expected_pairs and an
    exact 5M batch (above scoring.max_cpu_hours), each naming its key, unless the config raises the
    limit."""
    d, _, overlay = user_setup(tmp_path, real_data)
    laser2_files(tmp_path / "my-data", overlay)
    overlay["corpus"]["expected_pairs"] = 5_000_000

    def plan(**extra):
        (d / "mine.yaml").write_text(yaml.safe_dump({**overlay, **extra}), encoding="utf-8")
        return snakemake("-n", "filtered", "--configfile", "config/own-corpus.yaml", "mine.yaml", cwd=d)

    r = plan()
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    est = re.search(r"scoring estimate, encoder laser2 \(dimension not stated: 1024 assumed\): 1 job\(s\), each 1 "
                    r"batch\(es\) of <= 5,000,000 pairs, index ivf-blas, nlist (\d+), nprobe (\d+), dim 1024: about "
                    r"([\d.e+]+) CPU-hours per batch", r.stderr)
    assert est, r.stderr[-2000:]
    assert 0.1 < float(est.group(3)) < 24  # hours on a CPU, not days
    r = plan(selection={"sizes": ["5M"]})
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "selection.sizes: 5M (5,000,000 pairs) is not below corpus.expected_pairs" in out
    r = plan(scoring={"index": "flat"})
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "scoring.index: flat (exact) with scoring.batch_size 5,000,000" in out
    assert "above scoring.max_cpu_hours (24)" in out
    r = plan(scoring={"index": "flat", "max_cpu_hours": 1000})
    assert r.returncode == 0 and "index exact, dim 1024" in r.stderr


def test_template_plans_10k_to_50M_pairs_with_only_the_corpus_changed(tmp_path, real_data):
    """Issue 32: the template's N is a share of corpus.expected_pairs (10%), so a corpus of 10k pairs
    and one of 50M plan without an edit beyond the corpus (N = 1k and 5M), each with its estimate;
    with preprocess.expected_keep the share is of the pairs expected to be kept."""
    d, _, overlay = user_setup(tmp_path, real_data)
    laser2_files(tmp_path / "my-data", overlay)
    # the share is of the pairs expected after preprocessing: half kept, 10% of 10k is N = 500
    for pairs, keep, n, index in ((10_000, 1, "1k", "index exact"), (50_000_000, 1, "5M", "index ivf-blas"),
                                  (10_000, 0.5, "500", "index exact")):
        overlay["corpus"]["expected_pairs"] = pairs
        overlay.setdefault("preprocess", {})["expected_keep"] = keep
        (d / "mine.yaml").write_text(yaml.safe_dump(overlay), encoding="utf-8")
        r = snakemake("-n", "-p", "filtered", "--configfile", "config/own-corpus.yaml", "mine.yaml", cwd=d)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        assert f"ratio.{n}." in r.stdout and "scoring estimate, encoder laser2" in r.stderr
        assert index in r.stderr, r.stderr[-2000:]


def test_an_encoder_kind_whose_package_is_missing_is_refused_at_plan_time(monkeypatch, tmp_path):
    """The plan checks of sentence-transformers, the multilingual USE and LASER3 students name the
    package to install when it is not importable (find_spec: nothing is imported)."""
    import importlib.util

    from marginmine.encoders import laser_pretrained, sbert, use_multilingual
    from marginmine.errors import MarginmineError

    real = importlib.util.find_spec
    gone = {"sentence_transformers", use_multilingual.MODULE, "laser_encoders"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in gone else real(name, *a))
    st = tmp_path / "st"
    st.mkdir()
    (st / "modules.json").write_text("[]")
    with pytest.raises(MarginmineError, match=r"pip install 'marginmine\[st\]'"):
        sbert.plan_check({"path": str(st), "langs": ["en", "de"]}, digest=lambda p: "")
    with pytest.raises(MarginmineError, match="is not installed"):
        use_multilingual.plan_check({"langs": ["en", "de"]}, digest=lambda p: "")
    files = {}
    for name in ("laser2.pt", "laser2.spm", "laser2.cvocab", "laser3-wol_Latn.v1.pt"):
        (tmp_path / name).write_bytes(name.encode())
        files[name] = tmp_path / name
    pins = {k: hashlib.sha256(files[f].read_bytes()).hexdigest()
            for k, f in (("model", "laser2.pt"), ("spm", "laser2.spm"), ("cvocab", "laser2.cvocab"))}
    params = {"model": str(files["laser2.pt"]), "spm": str(files["laser2.spm"]), "cvocab": str(files["laser2.cvocab"]),
              "sha256": pins, "langs": ["en", "wo"],
              "lang_models": {"wo": {"model": str(files["laser3-wol_Latn.v1.pt"]), "spm": str(files["laser2.spm"]),
                                     "cvocab": str(files["laser2.cvocab"]),
                                     "sha256": {**pins, "model": hashlib.sha256(
                                         files["laser3-wol_Latn.v1.pt"].read_bytes()).hexdigest()}}}}
    digest = lambda p: hashlib.sha256(Path(p).read_bytes()).hexdigest()  # noqa: E731
    with pytest.raises(MarginmineError, match="laser_encoders==0.0.2"):
        laser_pretrained.plan_check(params, digest)
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert laser_pretrained.plan_check(params, digest) == ["en", "wo"]
