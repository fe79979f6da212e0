"""NMT + BLEU (issue #5), the parts without a trained model: checkpoint averaging, params and logs,
BLEU (sacreBLEU and multi-bleu.perl-style tokenised BLEU), the report, bad input, decoding batches
and fairseq's time budget. The tiny real run (a trained model) is tests/test_nmt_run.py."""

from __future__ import annotations

import gzip
import json
import math
import random
from collections import Counter
from pathlib import Path

import fairseq  # noqa: F401 (must import: a missing library fails, never skips)
import pytest
import sacrebleu  # noqa: F401 (must import: a missing library fails, never skips)
import sacremoses  # noqa: F401 (must import: a missing library fails, never skips)
import sentencepiece  # noqa: F401 (must import: a missing library fails, never skips)
import torch

from marginmine import cli
from marginmine.errors import InputError
from marginmine.fairseq_process import parse_train_log
from marginmine.nmt.checkpoints import (
    average_checkpoints,
    average_state_dicts,
    averaging_window,
    last_epoch_checkpoints,
)
from marginmine.nmt.evaluate import parse_hypotheses, score_bleu, write_bleu_report
from marginmine.nmt.params import NmtError, fairseq_env, resolve_device, resolve_params
from marginmine.nmt.train import train_nmt

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
        "x | INFO | valid | epoch 003 | valid on 'valid' subset | loss 8.5 | ppl 362.0 | num_updates 87 "
        "| best_loss 8.5",
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
# decoding batches and fairseq's time budget


def test_length_batches_group_equal_lengths_in_input_order():
    from marginmine.nmt.ctdecode import length_batches

    pieces = [["a"] * n for n in (3, 1, 3, 2, 3, 1)]
    assert length_batches(pieces, 2) == [[1, 5], [3], [0, 2], [4]]


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


def test_a_lean_fairseq_start_leaves_out_scikit_learn_and_keeps_translation():
    """marginmine.fairseq_process.lean_fairseq: fairseq imported in a fresh process registers the
    translation task, its transformer and label-smoothed loss (what NMT trains with) and the LASER
    task's base, but not the three modules that pull in scikit-learn, scipy.stats and pandas."""
    import subprocess
    import sys

    probe = (
        "import sys, json\n"
        "from marginmine.fairseq_process import UNUSED_MODULES, lean_fairseq\n"
        "lean_fairseq()\n"
        "import fairseq.tasks, fairseq.criterions, fairseq.models\n"
        "from fairseq.tasks import TASK_REGISTRY\n"
        "from fairseq.criterions import CRITERION_REGISTRY\n"
        "from fairseq.models import ARCH_MODEL_REGISTRY\n"
        "print(json.dumps({'sklearn': 'sklearn' in sys.modules, 'scipy.stats': 'scipy.stats' in sys.modules,\n"
        "  'translation': 'translation' in TASK_REGISTRY, 'transformer': 'transformer' in ARCH_MODEL_REGISTRY,\n"
        "  'ls': 'label_smoothed_cross_entropy' in CRITERION_REGISTRY,\n"
        "  'left_out': sorted(m for m in UNUSED_MODULES if getattr(sys.modules.get(m), '__file__', None)),\n"
        "  'audio_task': 'audio_classification' in TASK_REGISTRY}))\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"sklearn": False, "scipy.stats": False, "translation": True, "transformer": True, "ls": True,
                   "left_out": [], "audio_task": False}, got
