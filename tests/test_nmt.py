"""NMT + BLEU (issue #5): checkpoint averaging, BLEU (sacreBLEU and multi-bleu.perl-style tokenised
BLEU), the report, bad input, and a tiny real run: train on 2,000 Multi30k pairs, translate 37
lines (not a multiple of the batch size, one of them empty), rerun (nothing redone), resume."""

from __future__ import annotations

import gzip
import json
import logging
import math
import random
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

import torch  # noqa: E402
import fairseq  # noqa: E402,F401
import sentencepiece  # noqa: E402,F401
import sacrebleu  # noqa: E402,F401
import sacremoses  # noqa: E402,F401

from marginmine import cli
from marginmine.errors import InputError
from marginmine.nmt.evaluate import (parse_hypotheses, score_bleu, translate, translate_files,
                                     write_bleu_report)
from marginmine.fairseq_process import parse_train_log
from marginmine.nmt.checkpoints import (average_checkpoints, average_state_dicts, averaging_window,
                                        last_epoch_checkpoints)
from marginmine.nmt.params import NmtError, fairseq_env, resolve_device, resolve_params
from marginmine.nmt.train import load_manifest, train_nmt

TINY = {"encoder_layers": 1, "decoder_layers": 1, "encoder_embed_dim": 64, "decoder_embed_dim": 64,
        "encoder_ffn_embed_dim": 128, "decoder_ffn_embed_dim": 128, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "bpe_vocab": 1000, "max_epoch": 1, "lr": 0.002, "warmup_updates": 20,
        "max_tokens": 2000, "log_interval": 10, "average_last": 2, "dropout": 0.1}
N_TRAIN, N_DEV, N_TEST = 2000, 60, 37
THREADS = 1  # the 2-core CI machine is shared; oversubscribed OpenMP is very slow


# ---------------------------------------------------------------------------------------------
# checkpoint averaging


def test_average_state_dicts_means_float_tensors_and_keeps_dtypes():
    a = {"w": torch.tensor([1.0, 2.0]), "h": torch.tensor([1.0], dtype=torch.float16), "n": torch.tensor([3])}
    b = {"w": torch.tensor([3.0, 6.0]), "h": torch.tensor([2.0], dtype=torch.float16), "n": torch.tensor([5])}
    c = {"w": torch.tensor([5.0, 1.0]), "h": torch.tensor([3.0], dtype=torch.float16), "n": torch.tensor([7])}
    avg = average_state_dicts([a, b, c])
    torch.testing.assert_close(avg["w"], torch.tensor([3.0, 3.0]))
    assert avg["h"].dtype == torch.float16 and float(avg["h"]) == 2.0
    assert avg["n"].dtype == torch.int64 and int(avg["n"]) == 7  # non-float: the last one's
    torch.testing.assert_close(a["w"], torch.tensor([1.0, 2.0]))  # inputs untouched
    assert average_state_dicts([a])["w"].tolist() == [1.0, 2.0]
    # float64 accumulation: no drift over many checkpoints
    many = average_state_dicts({"x": torch.full((3,), 0.1, dtype=torch.float32)} for _ in range(1000))
    torch.testing.assert_close(many["x"], torch.full((3,), 0.1), rtol=0, atol=1e-8)


def test_average_state_dicts_rejects_mismatches():
    with pytest.raises(ValueError, match="no state dicts"):
        average_state_dicts([])
    with pytest.raises(ValueError, match="different keys"):
        average_state_dicts([{"a": torch.zeros(2)}, {"b": torch.zeros(2)}])
    with pytest.raises(ValueError, match="shape"):
        average_state_dicts([{"a": torch.zeros(2)}, {"a": torch.zeros(3)}])


def test_average_checkpoints_writes_a_fairseq_style_checkpoint(tmp_path):
    paths = []
    for i in range(3):
        p = tmp_path / f"checkpoint{i + 1}.pt"
        torch.save({"model": {"w": torch.full((2, 2), float(i))}, "cfg": {"epoch": i},
                    "last_optimizer_state": {"big": torch.zeros(10)}, "optimizer_history": [{"n": i}]}, p)
        paths.append(p)
    out = tmp_path / "avg.pt"
    average_checkpoints(paths, out)
    ckpt = torch.load(out, weights_only=False)
    torch.testing.assert_close(ckpt["model"]["w"], torch.full((2, 2), 1.0))
    assert ckpt["cfg"] == {"epoch": 2} and ckpt["optimizer_history"] == [{"n": 2}]  # the last one's
    assert ckpt["last_optimizer_state"] is None
    assert ckpt["averaged_from"] == ["checkpoint1.pt", "checkpoint2.pt", "checkpoint3.pt"]
    assert not list(tmp_path.glob("*.part"))


def test_last_epoch_checkpoints_sorts_numerically(tmp_path):
    for name in ["checkpoint_last.pt", "checkpoint_best.pt", "checkpoint_2_100.pt", "checkpoint.best_loss_3.pt",
                 *[f"checkpoint{e}.pt" for e in (1, 2, 9, 10, 11)]]:
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in last_epoch_checkpoints(tmp_path, 3)] == ["checkpoint9.pt", "checkpoint10.pt",
                                                                     "checkpoint11.pt"]
    assert len(last_epoch_checkpoints(tmp_path, 10)) == 5
    # stopped inside epoch 12 by a time budget: checkpoint_last.pt is the newest and is kept
    assert [p.name for p in averaging_window(tmp_path, 3, partial_epoch=True)] == [
        "checkpoint10.pt", "checkpoint11.pt", "checkpoint_last.pt"]
    assert [p.name for p in averaging_window(tmp_path, 1, partial_epoch=True)] == ["checkpoint_last.pt"]
    assert [p.name for p in averaging_window(tmp_path, 2, partial_epoch=False)] == ["checkpoint10.pt",
                                                                                   "checkpoint11.pt"]
    for p in tmp_path.glob("checkpoint[0-9]*.pt"):
        p.unlink()
    assert [p.name for p in averaging_window(tmp_path, 5, partial_epoch=False)] == ["checkpoint_last.pt"]


# ---------------------------------------------------------------------------------------------
# params, device, logs, hypotheses


def test_params_defaults_alias_and_validation():
    p = resolve_params({"bpe_merges": 40000, "encoder_layers": 3})
    assert p["bpe_vocab"] == 40000 and "bpe_merges" not in p and p["encoder_layers"] == 3
    assert p["decoder_layers"] is None  # left to the arch
    assert p["arch"] == "transformer" and p["label_smoothing"] == 0.1 and p["average_last"] == 5
    with pytest.raises(NmtError, match="unknown NMT params"):
        resolve_params({"encoder_layer": 3})
    with pytest.raises(NmtError, match="never ends"):
        resolve_params({"max_epoch": 0, "max_update": 0})
    with pytest.raises(NmtError, match="device"):
        resolve_params({"device": "tpu"})
    with pytest.raises(NmtError, match="normalize_before must be true or false"):
        resolve_params({"normalize_before": "yes"})


def test_pre_norm_reaches_fairseq_and_changes_the_model_fingerprint(tmp_path):
    from marginmine.nmt.params import MODEL_KEYS
    from marginmine.nmt.train import _train_cmd

    post = _train_cmd(tmp_path, "en", "de", resolve_params({}), "cpu", 1)
    pre = _train_cmd(tmp_path, "en", "de", resolve_params({"normalize_before": True}), "cpu", 1)
    assert "--encoder-normalize-before" not in post
    assert set(pre) - set(post) == {"--encoder-normalize-before", "--decoder-normalize-before"}
    assert "normalize_before" in MODEL_KEYS  # a resumed run with the other setting starts afresh


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_cuda_without_gpu_fails_at_once(tmp_path):
    with pytest.raises(NmtError, match="no CUDA GPU is visible"):
        resolve_device("cuda")
    assert resolve_device("auto") == "cpu"
    with pytest.raises(NmtError, match="no CUDA GPU"):
        train_nmt(tmp_path / "missing.tsv", tmp_path / "d.en", tmp_path / "d.de", tmp_path / "w", "en", "de",
                  dict(TINY, device="cuda"))
    assert not (tmp_path / "w").exists()  # nothing started


def test_unpickling_is_allowed_only_for_our_checkpoints(monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # inherited from outside: not passed on
    assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" not in fairseq_env(2, own_checkpoints=False)
    env = fairseq_env(2)
    assert env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] == "1" and env["OMP_NUM_THREADS"] == "2"


def test_parse_train_log():
    lines = [
        "x | INFO | fairseq.trainer | Loaded checkpoint /w/checkpoints/checkpoint_last.pt (epoch 2 @ 58 updates)",
        "x | INFO | train_inner | epoch 003:     10 / 29 loss=9.1, ppl=549.1, wps=9656.1, ups=7.43, num_updates=68",
        "x | INFO | valid | epoch 003 | valid on 'valid' subset | loss 8.5 | ppl 362.0 | num_updates 87 | best_loss 8.5",
        "x | INFO | train | epoch 003 | loss 8.9 | wps 10571.4 | num_updates 87 | lr 0.0018",
        "x | INFO | fairseq_cli.train | early stop since valid performance hasn't improved for last 2 runs",
        ("x | INFO | fairseq.checkpoint_utils | Saved checkpoint /w/checkpoints/checkpoint_last.pt (epoch 4 @ 90 "
         "updates, score 8.4) (writing took 0.03 seconds)"),
    ]
    r = parse_train_log(lines)
    assert r["resumed_from"] == {"continues_epoch": 2, "num_updates": 58}
    assert r["epoch"] == 3 and r["num_updates"] == 87 and r["early_stop"] and not r["stopped_by_time"]
    assert r["valid"] == [{"epoch": 3, "loss": 8.5, "ppl": 362.0, "num_updates": 87, "best_loss": 8.5}]
    assert r["train"][0]["wps"] == 10571.4 and r["wps"] == [9656.1] and r["inner_loss"] == [(68, 9.1)]
    assert r["last_saved"] == {"file": "checkpoint_last.pt", "epoch": 4, "num_updates": 90}


def test_parse_hypotheses_restores_order_and_refuses_gaps():
    lines = ["S-1\tb", "H-1\t-0.5\tzwei", "D-1\t-0.5\tzwei", "H-0\t-0.1\teins", "H-2\t-0.3\t", "P-2\t-0.1"]
    assert parse_hypotheses(lines, 3) == ["eins", "zwei", ""]
    with pytest.raises(NmtError, match="2 hypotheses for 3 sentences"):
        parse_hypotheses(lines[:4], 3)


# ---------------------------------------------------------------------------------------------
# BLEU


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


def multi_bleu(hyps: list[str], refs: list[str]) -> float:
    """Independent port of multi-bleu.perl (one reference, case-sensitive) as the test oracle."""
    correct, total = [0] * 5, [0] * 5
    hyp_len = ref_len = 0
    for h, r in zip(hyps, refs):
        hw, rw = h.split(), r.split()
        hyp_len, ref_len = hyp_len + len(hw), ref_len + len(rw)
        for n in range(1, 5):
            hc = Counter(tuple(hw[i:i + n]) for i in range(len(hw) - n + 1))
            rc = Counter(tuple(rw[i:i + n]) for i in range(len(rw) - n + 1))
            total[n] += sum(hc.values())
            correct[n] += sum(min(c, rc[g]) for g, c in hc.items())
    bp = 1.0 if hyp_len >= ref_len else math.exp(1 - ref_len / hyp_len)
    logs = [math.log(correct[n] / total[n]) if total[n] and correct[n] else -9999999999 for n in range(1, 5)]
    return 100 * bp * math.exp(sum(logs) / 4)


def test_bleu_identical_is_100(tmp_path):
    refs = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee, oder?", "Das ist „gut“."]
    r = score_bleu(_write(tmp_path / "h", refs), _write(tmp_path / "r", refs), lang="de")
    assert r["bleu"] == pytest.approx(100.0) and r["tok_bleu"] == pytest.approx(100.0)
    assert r["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert r["lines"] == 3 and r["bp"] == 1.0


def test_bleu_known_case_is_case_sensitive_and_tokenised(tmp_path):
    # tokens: The cat sat on the mat .  vs  the cat sat on the mat .  ("The" != "the")
    # precisions 6/7, 5/6, 4/5, 3/4; BP 1 -> (3/7) ** 0.25
    r = score_bleu(_write(tmp_path / "h", ["The cat sat on the mat."]),
                   _write(tmp_path / "r", ["the cat sat on the mat."]), lang="en")
    assert r["tok_bleu"] == pytest.approx(100 * (3 / 7) ** 0.25, abs=1e-9)
    assert r["bleu"] == pytest.approx(100 * (3 / 7) ** 0.25, abs=1e-9)  # 13a splits the same way here
    # no 4-gram match: multi-bleu.perl gives 0 (no smoothing); sacreBLEU smooths
    r = score_bleu(_write(tmp_path / "h2", ["the cat sat down on a mat"]),
                   _write(tmp_path / "r2", ["the cat sat on the mat"]))
    assert r["tok_bleu"] == 0.0 and r["bleu"] > 0.0


def test_tokenised_bleu_matches_multi_bleu_on_real_sentences(real_data, tmp_path):
    from sacremoses import MosesTokenizer

    refs = (real_data / "wmt-newstest-ende" / "newstest2014.de").read_text(encoding="utf-8").splitlines()[:300]
    rng = random.Random(0)
    hyps = []
    for ref in refs:  # dropped words, lower-casing, reordering
        words = [w for w in ref.split() if rng.random() > 0.2]
        words = [w.lower() for w in words] if rng.random() < 0.3 else words
        if rng.random() < 0.2:
            rng.shuffle(words)
        hyps.append(" ".join(words))
    r = score_bleu(_write(tmp_path / "h", hyps), _write(tmp_path / "r", refs), lang="de")
    tok = MosesTokenizer(lang="de")
    expected = multi_bleu([tok.tokenize(h, escape=False, return_str=True) for h in hyps],
                          [tok.tokenize(x, escape=False, return_str=True) for x in refs])
    assert r["tok_bleu"] == pytest.approx(expected, abs=1e-6)
    assert 10 < r["bleu"] < 90


def test_bleu_line_count_mismatch_names_files(tmp_path):
    with pytest.raises(InputError, match=r"h: has 1 lines but the reference .*r has 2"):
        score_bleu(_write(tmp_path / "h", ["a"]), _write(tmp_path / "r", ["a", "b"]))


def test_bleu_report_format(tmp_path):
    test = score_bleu(_write(tmp_path / "h", ["The cat sat on the mat."]),
                      _write(tmp_path / "r", ["the cat sat on the mat."]))
    out = tmp_path / "results" / "bleu_2k.txt"
    sidecar = write_bleu_report(out, test, None, {"newstest2014": test}, {"arch": "transformer", "train_pairs": 2})
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "80.91"
    assert any(line.startswith("newstest2014: sacreBLEU 80.91") for line in lines)
    assert any("tok:13a" in line for line in lines) and any("train_pairs: 2" in line for line in lines)
    data = json.loads(sidecar.read_text())
    assert sidecar == out.with_suffix(".json") and data["bleu"] == 80.91 and data["dev"] is None
    assert data["test"]["tok_bleu"] == pytest.approx(test["tok_bleu"])


# ---------------------------------------------------------------------------------------------
# bad input (fails before fairseq starts)


@pytest.fixture
def dev_files(tmp_path):
    return _write(tmp_path / "dev.en", ["a b c", "d e"]), _write(tmp_path / "dev.de", ["x y z", "u v"])


def test_missing_training_file_is_named(tmp_path, dev_files):
    with pytest.raises(InputError, match=r"nope\.tsv\.gz: file not found"):
        train_nmt(tmp_path / "nope.tsv.gz", *dev_files, tmp_path / "w", "en", "de", TINY)


def test_one_column_line_names_file_and_line(tmp_path, dev_files, capsys):
    bad = tmp_path / "bad.tsv.gz"
    with gzip.open(bad, "wt", encoding="utf-8") as fh:
        fh.write("Hello .\tHallo .\t0.9\nA dog .\tEin Hund .\t0.8\nonly one column\n")
    with pytest.raises(InputError, match=r"bad\.tsv\.gz:3: has fewer than 2 tab-separated columns"):
        train_nmt(bad, *dev_files, tmp_path / "w", "en", "de", TINY)
    # the CLI: exit 2, one line naming file:line, no traceback
    rc = cli.main(["train-nmt", "--train", str(bad), "--dev-src", str(dev_files[0]), "--dev-ref",
                   str(dev_files[1]), "--workdir", str(tmp_path / "w2"), "--src-lang", "en", "--tgt-lang", "de",
                   "--params", json.dumps(TINY)])
    err = capsys.readouterr().err
    assert rc == 2 and "bad.tsv.gz:3" in err and "Traceback" not in err


def test_misaligned_dev_set_is_refused(tmp_path, dev_files):
    good = tmp_path / "t.tsv"
    good.write_text("Hello .\tHallo .\n", encoding="utf-8")
    short = _write(tmp_path / "short.de", ["x"])
    with pytest.raises(InputError, match=r"short\.de: has 1 lines but .*dev\.en has 2"):
        train_nmt(good, dev_files[0], short, tmp_path / "w", "en", "de", TINY)


def test_evaluate_without_a_trained_model_says_so(tmp_path, capsys):
    rc = cli.main(["evaluate", "--workdir", str(tmp_path), "--test-src", "a", "--test-ref", "b",
                   "--output", str(tmp_path / "bleu.txt")])
    err = capsys.readouterr().err
    assert rc == 2 and "has not finished" in err and "Traceback" not in err


# ---------------------------------------------------------------------------------------------
# a tiny real run


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, real_data):
    d = real_data / "multi30k"
    out = tmp_path_factory.mktemp("nmt_data")

    def head(name: str, n: int, skip: int = 0) -> list[str]:
        with gzip.open(d / name, "rt", encoding="utf-8") as fh:
            return [line.rstrip("\n") for _, line in zip(range(skip + n), fh)][skip:]

    en, de = head("train.en.gz", N_TRAIN), head("train.de.gz", N_TRAIN)
    with gzip.open(out / "top.tsv.gz", "wt", encoding="utf-8") as fh:  # a third column, as select writes
        fh.writelines(f"{s}\t{t}\t{i / N_TRAIN:.4f}\n" for i, (s, t) in enumerate(zip(en, de)))
    _write(out / "dev.en", head("val.en.gz", N_DEV))
    _write(out / "dev.de", head("val.de.gz", N_DEV))
    test_en, test_de = head("test_2016_flickr.en.gz", N_TEST), head("test_2016_flickr.de.gz", N_TEST)
    test_en[5] = "   "  # an empty source line must keep its place
    _write(out / "test.en", test_en)
    _write(out / "test.de", test_de)
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory, corpus):
    work = tmp_path_factory.mktemp("nmt") / "model"
    out = train_nmt(corpus / "top.tsv.gz", corpus / "dev.en", corpus / "dev.de", work, "en", "de", dict(TINY),
                    threads=THREADS, seed=3)
    assert out == work / "checkpoint_avg.pt"
    return work


@pytest.mark.slow
def test_training_writes_a_decodable_model(trained):
    m = load_manifest(trained, verify=True)
    assert m["src_lang"] == "en" and m["tgt_lang"] == "de" and m["arch"] == "transformer"
    info = m["info"]
    assert info["train_pairs"] == N_TRAIN and info["dev_pairs"] == N_DEV
    assert info["bpe_vocab"] <= 1000 and info["dict_size"] > 100
    assert info["epoch"] == 1 and info["num_updates"] > 0 and info["resumed_from"] is None
    assert info["averaged"] == ["checkpoint1.pt"] and not info["partial_epoch"] and info["dev_loss"] is not None
    assert info["device"] == "cpu" and not info["stopped_by_time"]
    assert set(m["files"].values()) == {"checkpoint_avg.pt", "spm/spm.model", "bin/dict.en.txt", "bin/dict.de.txt"}
    ckpt = torch.load(trained / "checkpoint_avg.pt", weights_only=False)
    assert ckpt["last_optimizer_state"] is None and ckpt["averaged_from"] == ["checkpoint1.pt"]
    assert "Loaded checkpoint" not in (trained / "train.log").read_text()


@pytest.mark.slow
def test_translate_keeps_every_line_and_evaluate_writes_the_report(trained, corpus, tmp_path):
    hyp = tmp_path / "hyp" / "test.de"
    stats = translate(trained, corpus / "test.en", hyp, beam=5, batch_size=8, threads=THREADS)
    lines = hyp.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == N_TEST == stats["lines"]  # 37 = 4 batches of 8 + 5
    assert lines[5] == "" and stats["empty_sources"] == 1
    assert sum(1 for x in lines[:-1] if x.strip()) >= N_TEST - 5  # a 1-epoch model says something
    assert not list(hyp.parent.glob(".translate.*"))  # temp files cleaned

    out = tmp_path / "results" / "bleu_2k.txt"
    rc = cli.main(["evaluate", "--workdir", str(trained), "--test-src", str(corpus / "test.en"),
                   "--test-ref", str(corpus / "test.de"), "--output", str(out), "--batch-size", "8",
                   "--threads", str(THREADS)])
    assert rc == 0
    text = out.read_text(encoding="utf-8").splitlines()
    assert re.fullmatch(r"\d+\.\d\d", text[0])
    assert any(line.startswith("test: sacreBLEU ") for line in text)
    data = json.loads(out.with_suffix(".json").read_text())
    assert f"{data['test']['bleu']:.2f}" == text[0] and data["test"]["lines"] == N_TEST
    assert data["meta"]["train_pairs"] == N_TRAIN and data["meta"]["averaged"] == ["checkpoint1.pt"]
    hyp2 = out.with_name("bleu_2k.hyp") / "test.de"
    assert hyp2.read_text(encoding="utf-8") == hyp.read_text(encoding="utf-8")  # deterministic


@pytest.mark.slow
def test_one_call_for_several_files_gives_each_file_what_its_own_call_gives(trained, corpus, tmp_path):
    """evaluate decodes all its sets in one fairseq start-up: the hypotheses must not depend on it."""
    alone = tmp_path / "alone" / "test.de"
    translate(trained, corpus / "test.en", alone, beam=5, batch_size=8, threads=THREADS)
    both = [(corpus / "dev.en", tmp_path / "both" / "dev.de"), (corpus / "test.en", tmp_path / "both" / "test.de")]
    stats = translate_files(trained, both, beam=5, batch_size=8, threads=THREADS)
    assert [s["lines"] for s in stats] == [N_DEV, N_TEST] and all(s["files_in_call"] == 2 for s in stats)
    assert (tmp_path / "both" / "test.de").read_bytes() == alone.read_bytes()
    assert sum(1 for _ in (tmp_path / "both" / "dev.de").open()) == N_DEV
    with pytest.raises(NmtError, match="same file"):
        translate_files(trained, [(corpus / "dev.en", alone), (corpus / "test.en", alone)])


@pytest.mark.slow
def test_chunked_translation_resumes_after_a_kill_and_gives_the_same_file(trained, corpus, tmp_path, monkeypatch):
    """The corpus-translation API: chunks saved as they finish; a run killed after two chunks
    resumes at the third and ends with the bytes of an uninterrupted chunked run."""
    import marginmine.nmt.evaluate as ev

    whole = tmp_path / "whole.de"
    translate_files(trained, [(corpus / "test.en", whole)], beam=5, batch_size=8, threads=THREADS, chunk_lines=10)
    out = tmp_path / "chunked" / "test.de"
    calls = []
    real = ev._Decoder.decode

    def dying(self, pieces, logfile, stats):  # noqa: ANN001, ANN202
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        calls.append(len(pieces))
        return real(self, pieces, logfile, stats)

    monkeypatch.setattr(ev._Decoder, "decode", dying)
    with pytest.raises(KeyboardInterrupt):
        translate_files(trained, [(corpus / "test.en", out)], beam=5, batch_size=8, threads=THREADS, chunk_lines=10)
    assert not out.exists() and len(list((out.parent / ".test.de.chunks").glob("0*.txt"))) == 2
    monkeypatch.setattr(ev._Decoder, "decode", real)
    st = translate_files(trained, [(corpus / "test.en", out)], beam=5, batch_size=8, threads=THREADS, chunk_lines=10)[0]
    assert (st["chunks"], st["chunks_resumed"]) == (4, 2)  # 37 lines: 10 + 10 + 10 + 7
    assert out.read_bytes() == whole.read_bytes() and not (out.parent / ".test.de.chunks").exists()
    with pytest.raises(NmtError, match="at least 1"):
        translate_files(trained, [(corpus / "test.en", out)], chunk_lines=0)


@pytest.mark.slow
def test_the_translate_command_translates_a_shard_column_line_for_line(trained, corpus, tmp_path):
    """translate-then-vote's corpus step: a TSV column translated in chunks by the CLI, one line
    per shard line, the empty source kept as an empty line and counted, the hypotheses those of the
    plain file; a translator of the other direction is refused."""
    sources = (corpus / "test.en").read_text(encoding="utf-8").split("\n")[:-1]
    shard = tmp_path / "shard.tsv.gz"
    with gzip.open(shard, "wt", encoding="utf-8") as fh:
        fh.writelines(f"{i}\t{s}\n" for i, s in enumerate(sources))
    plain = tmp_path / "plain.de"
    translate(trained, corpus / "test.en", plain, beam=5, batch_size=8, threads=THREADS)
    out, stats = tmp_path / "shard.de.gz", tmp_path / "stats.json"
    rc = cli.main(["translate", "--workdir", str(trained), "--src-lang", "en", "--tgt-lang", "de", "--input",
                   str(shard), "--column", "1", "--output", str(out), "--stats", str(stats), "--chunk-lines", "10",
                   "--batch-size", "8", "--threads", str(THREADS)])
    assert rc == 0
    got = gzip.open(out, "rt", encoding="utf-8").read()
    assert got == plain.read_text(encoding="utf-8") and got.count("\n") == len(sources) == N_TEST
    st = json.loads(stats.read_text())
    assert (st["lines"], st["empty_sources"], st["column"], st["chunks"]) == (N_TEST, 1, 1, 4)
    assert st["empty_hypotheses"] == sum(1 for line in got.split("\n")[:-1] if not line.strip()) >= 1
    assert cli.main(["translate", "--workdir", str(trained), "--src-lang", "de", "--tgt-lang", "en", "--input",
                     str(shard), "--column", "1", "--output", str(tmp_path / "x.en")]) == 2  # wrong direction
    assert cli.main(["translate", "--workdir", str(trained), "--src-lang", "en", "--tgt-lang", "de", "--input",
                     str(shard), "--column", "2", "--output", str(tmp_path / "y.de")]) == 2  # no such column


@pytest.mark.slow
def test_the_translate_command_killed_by_sigkill_resumes_to_the_same_bytes(trained, real_data, tmp_path):
    """Crash safety of translate-then-vote's corpus step, proven by killing: `marginmine translate`
    SIGKILLed (no handler runs) once two chunks are on disk, then rerun, ends with the bytes of an
    uninterrupted run and says how many chunks it reused; the killed run left no output."""
    import os
    import signal
    import subprocess
    import sys
    import time

    with gzip.open(real_data / "multi30k/test_2016_flickr.en.gz", "rt", encoding="utf-8") as fh:
        sources = [line.rstrip("\n") for line in fh][:600]
    shard = tmp_path / "shard.tsv.gz"
    with gzip.open(shard, "wt", encoding="utf-8") as fh:
        fh.writelines(f"id{i}\t{s}\n" for i, s in enumerate(sources))

    def argv(out: Path, stats: Path) -> list[str]:
        return [sys.executable, "-m", "marginmine.cli.main", "translate", "--workdir", str(trained), "--src-lang", "en",
                "--tgt-lang", "de", "--input", str(shard), "--column", "1", "--output", str(out), "--stats", str(stats),
                "--chunk-lines", "25", "--batch-size", "8", "--threads", "1"]

    whole = tmp_path / "whole.de.gz"
    subprocess.run(argv(whole, tmp_path / "whole.json"), check=True, capture_output=True)
    out, stats = tmp_path / "out.de.gz", tmp_path / "out.json"
    chunks = out.with_name(f".{out.name}.chunks")
    proc = subprocess.Popen(argv(out, stats), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        while proc.poll() is None and len(list(chunks.glob("0*.txt"))) < 2:
            time.sleep(0.005)
        assert proc.poll() is None, "finished before two chunks could be seen: make the input longer"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    done = len(list(chunks.glob("0*.txt")))
    assert proc.returncode == -signal.SIGKILL and not out.exists() and 2 <= done < 24, (proc.returncode, done)
    subprocess.run(argv(out, stats), check=True, capture_output=True)
    assert out.read_bytes() == whole.read_bytes() and not chunks.exists()
    st = json.loads(stats.read_text())
    assert st["chunks"] == 24 and 2 <= st["chunks_resumed"] <= done and st["lines"] == 600, st


@pytest.mark.slow
def test_rerun_does_not_retrain(trained, corpus, caplog):
    model = trained / "checkpoint_avg.pt"
    before = (model.stat().st_mtime_ns, (trained / "checkpoints" / "checkpoint_last.pt").stat().st_mtime_ns)
    with caplog.at_level(logging.INFO, logger="marginmine.nmt.train"):
        train_nmt(corpus / "top.tsv.gz", corpus / "dev.en", corpus / "dev.de", trained, "en", "de", dict(TINY),
                  threads=THREADS, seed=3)
    assert "nothing to do" in caplog.text
    assert (model.stat().st_mtime_ns, (trained / "checkpoints" / "checkpoint_last.pt").stat().st_mtime_ns) == before


@pytest.mark.slow
def test_more_updates_resume_from_the_last_checkpoint(trained, corpus, tmp_path, caplog):
    work = tmp_path / "model"
    shutil.copytree(trained, work)
    first = load_manifest(work)["info"]
    bin_mtime = (work / "bin" / "train.en-de.en.bin").stat().st_mtime_ns
    stop = first["num_updates"] + first["num_updates"] // 2  # inside epoch 2, as a time budget would
    with caplog.at_level(logging.INFO, logger="marginmine.nmt.train"):
        train_nmt(corpus / "top.tsv.gz", corpus / "dev.en", corpus / "dev.de", work, "en", "de",
                  dict(TINY, max_epoch=3, max_update=stop), threads=THREADS, seed=3)
    assert "reusing the BPE model and binarized data" in caplog.text
    assert (work / "bin" / "train.en-de.en.bin").stat().st_mtime_ns == bin_mtime
    info = load_manifest(work)["info"]
    assert info["resumed_from"] == {"continues_epoch": 2, "num_updates": first["num_updates"]}
    assert info["epoch"] == 2 and info["num_updates"] == stop
    # the half epoch is not thrown away: checkpoint_last.pt is the newest in the averaging window
    assert info["partial_epoch"] and info["averaged"] == ["checkpoint1.pt", "checkpoint_last.pt"]
    assert info["train_seconds_total"] > first["train_seconds_total"]
    # other model sizes on top of these checkpoints are refused, not silently mixed
    with pytest.raises(NmtError, match="different run"):
        train_nmt(corpus / "top.tsv.gz", corpus / "dev.en", corpus / "dev.de", work, "en", "de",
                  dict(TINY, max_epoch=3, encoder_layers=2), threads=THREADS, seed=3)


class _Started(Exception):
    pass


@pytest.mark.parametrize("resume_killed", [False, True])
def test_a_killed_training_restarts_unless_resume_killed(trained, corpus, tmp_path, caplog, monkeypatch,
                                                         resume_killed):
    """fairseq-train never returned (state.json still says it runs): the rerun trains from the start,
    since fairseq's resume is not byte-identical (tests/test_kill.py); resume_killed opts out."""
    import marginmine.nmt.train as nmt

    work = tmp_path / "model"
    shutil.copytree(trained, work)
    state = json.loads((work / "state.json").read_text())
    (work / "state.json").write_text(json.dumps({**state, "train_done": False, "fairseq_running": True}))
    seen = {}

    def fake_fairseq(cmd, *args, **kwargs):
        seen["checkpoints"] = sorted(p.name for p in (work / "checkpoints").iterdir())
        raise _Started

    monkeypatch.setattr(nmt, "run_fairseq", fake_fairseq)
    with caplog.at_level(logging.WARNING, logger="marginmine.nmt.train"), pytest.raises(_Started):
        train_nmt(corpus / "top.tsv.gz", corpus / "dev.en", corpus / "dev.de", work, "en", "de",
                  dict(TINY, max_epoch=3, resume_killed=resume_killed), threads=THREADS, seed=3)
    assert ("checkpoint_last.pt" in seen["checkpoints"]) == resume_killed
    assert ("was killed; training again from the start" in caplog.text) != resume_killed


@pytest.mark.slow
def test_tampered_model_is_refused_before_fairseq_loads_it(trained, corpus, tmp_path, monkeypatch):
    work = tmp_path / "model"
    shutil.copytree(trained, work, ignore=shutil.ignore_patterns("checkpoints", "data"))
    data = bytearray((work / "checkpoint_avg.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (work / "checkpoint_avg.pt").write_bytes(bytes(data))

    def no_fairseq(*args, **kwargs):
        raise AssertionError("fairseq started on an unverified checkpoint")

    monkeypatch.setattr("marginmine.nmt.evaluate.run_fairseq", no_fairseq)
    with pytest.raises(NmtError, match="SHA-256"):
        translate(work, corpus / "test.en", tmp_path / "h.de")


def test_length_batches_group_equal_lengths_in_input_order():
    from marginmine.nmt.ctdecode import length_batches

    pieces = [["a"] * n for n in (3, 1, 3, 2, 3, 1)]
    assert length_batches(pieces, 2) == [[1, 5], [3], [0, 2], [4]]


@pytest.mark.slow
def test_ctranslate2_and_fairseq_decode_the_same_model_alike(trained, corpus, tmp_path):
    """The default decoder (CTranslate2, the checkpoint converted once) against fairseq-generate
    with the same beam, length penalty and per-sentence length limit: one line per source, the
    same empty line, deterministic, and mostly the same hypotheses."""
    ct2 = tmp_path / "ct2.de"
    fs = tmp_path / "fairseq.de"
    st = translate(trained, corpus / "test.en", ct2, beam=5, batch_size=8, threads=THREADS)
    assert st["decoder"] == "ctranslate2" and (trained / "ct2" / "model.bin").is_file()
    converted = (trained / "ct2" / "model.bin").stat().st_mtime_ns
    again = tmp_path / "again.de"
    translate(trained, corpus / "test.en", again, beam=5, batch_size=8, threads=THREADS)
    assert again.read_bytes() == ct2.read_bytes()  # deterministic
    assert (trained / "ct2" / "model.bin").stat().st_mtime_ns == converted  # converted once
    translate(trained, corpus / "test.en", fs, beam=5, batch_size=8, threads=THREADS, decoder="fairseq")
    a, b = ct2.read_text().split("\n"), fs.read_text().split("\n")
    assert len(a) == len(b) == N_TEST + 1 and a[5] == b[5] == ""
    same = sum(x == y for x, y in zip(a, b))
    print(f"\nCTranslate2 vs fairseq-generate: {same - 1} of {N_TEST} hypotheses identical")
    assert same - 1 >= 0.8 * N_TEST, (same, a[:5], b[:5])
    (trained / "ct2" / "model_sha256.txt").write_text("another model\n")  # a retrained checkpoint
    translate(trained, corpus / "test.en", again, beam=5, batch_size=8, threads=THREADS)
    assert (trained / "ct2" / "model.bin").stat().st_mtime_ns != converted
    assert again.read_bytes() == ct2.read_bytes()
    with pytest.raises(NmtError, match="unknown decoder 'marian'"):
        translate(trained, corpus / "test.en", again, decoder="marian")


def test_time_budget_of_a_fairseq_call(monkeypatch):
    """One home for the budget of fairseq-train calls (NMT and the LASER-style encoder): fairseq's
    --stop-time-hours counts the training time of earlier calls, a budget spent before the first
    checkpoint is refused, and a late call still gets a second and a hard timeout."""
    import marginmine.fairseq_process as fp

    assert fp.time_budget(None, False, 0.0, None, "nmt", NmtError) == ([], None)
    monkeypatch.setattr(fp.time, "monotonic", lambda: 1000.0)
    args, timeout = fp.time_budget(1000.0 + fp.STARTUP_RESERVE_S + 600, True, 1800.0, 40, "nmt", NmtError)
    assert args == ["--stop-time-hours", f"{(1800 + 600) / 3600:.6f}"] and timeout == 600 + 120
    with pytest.raises(NmtError, match="nmt: the wall-clock budget \\(40 min\\) was used up"):
        fp.time_budget(1000.0, False, 0.0, 40, "nmt", NmtError)
    assert fp.time_budget(1000.0, True, 0.0, 40, "nmt", NmtError) == (["--stop-time-hours", f"{1 / 3600:.6f}"], 121.0)
