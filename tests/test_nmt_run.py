"""NMT (issue #5) on a tiny real run: train on 2,000 Multi30k pairs, translate 37 lines (not a
multiple of the batch size, one of them empty), rerun (nothing redone), resume, kill and restart,
the translate command (chunked, SIGKILLed), both decoders alike. The parts without a trained model
are tests/test_nmt.py."""

from __future__ import annotations

import gzip
import json
import logging
import re
import shutil
from pathlib import Path

import fairseq  # noqa: F401 (must import: a missing library fails, never skips)
import pytest
import sacrebleu  # noqa: F401 (must import: a missing library fails, never skips)
import sacremoses  # noqa: F401 (must import: a missing library fails, never skips)
import sentencepiece  # noqa: F401 (must import: a missing library fails, never skips)
import torch

from marginmine import cli
from marginmine.machine import machine
from marginmine.nmt.evaluate import translate, translate_files
from marginmine.nmt.params import NmtError
from marginmine.nmt.train import load_manifest, train_nmt
from test_nmt import N_DEV, N_TEST, N_TRAIN, THREADS, TINY, _write


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
    assert info["device"] == "cpu" and not info["stopped_by_time"] and info["machine"] == machine()
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
def test_more_updates_resume_from_the_last_checkpoint(trained, corpus, tmp_path, caplog, monkeypatch):
    work = tmp_path / "model"
    shutil.copytree(trained, work)
    first = load_manifest(work)["info"]
    bin_mtime = (work / "bin" / "train.en-de.en.bin").stat().st_mtime_ns
    stop = first["num_updates"] + first["num_updates"] // 2  # inside epoch 2, as a time budget would
    # resumed in another session on another CPU: the model names both machines
    monkeypatch.setattr("marginmine.nmt.train.machine", lambda: "Other CPU, 2 cores, avx2")
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
    assert info["machine"] == f"{first['machine']} + Other CPU, 2 cores, avx2"
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


@pytest.mark.slow
def test_jobs_decoding_one_model_side_by_side_convert_it_once(trained, tmp_path):
    """Two jobs that decode with one model at the same time (a translator's shards, two cores) find
    no ct2/ and both need it: the first converts under the lock, the second waits and uses it.
    Without the lock both wrote the same temporary directory and one failed (the smoke suite's
    translate_text on two cores: "CTranslate2 could not convert ...")."""
    from concurrent.futures import ThreadPoolExecutor

    from marginmine.nmt.ctdecode import converted_model

    work = tmp_path / "model"
    shutil.copytree(trained, work, ignore=shutil.ignore_patterns("ct2", ".ct2*"))
    manifest = load_manifest(work)
    with ThreadPoolExecutor(max_workers=2) as pool:  # each call opens the lock file itself: a flock apart
        done = list(pool.map(lambda _: converted_model(work, manifest), range(2)))
    assert done == [work / "ct2"] * 2 and (work / "ct2" / "model.bin").is_file()
    assert (work / "ct2" / "model_sha256.txt").read_text().strip() == manifest["sha256"][manifest["files"]["model"]]
    assert not (work / ".ct2.part").exists()


def test_a_time_cap_that_ends_training_is_an_error_and_warn_records_it(trained, corpus, tmp_path, monkeypatch):
    """A fairseq-train stopped by --stop-time-hours (its log says so) before max_epoch: on_time_cap error
    (the default) writes no manifest and leaves the run to resume; warn keeps the model and records why
    (marginmine.timecap)."""
    import marginmine.nmt.train as nmt
    from marginmine.timecap import TimeCapError

    work = tmp_path / "model"
    shutil.copytree(trained, work)
    state = json.loads((work / "state.json").read_text())
    (work / "state.json").write_text(json.dumps({**state, "train_done": False}))
    n = load_manifest(work)["info"]["num_updates"]
    lines = [f"x | INFO | train_inner | epoch 002:     10 / 29 loss=9.1, ppl=549.1, wps=9656.1, ups=7.43, "
             f"num_updates={n + 10}",
             "x | INFO | fairseq_cli.train | Stopping training due to cumulative_training_time: 0.6 > "
             "stop_time_hours: 0.5 hour(s)",
             f"x | INFO | train | epoch 002 | loss 8.9 | wps 10571.4 | num_updates {n + 10} | lr 0.0018"]
    monkeypatch.setattr(nmt, "run_fairseq", lambda cmd, *a, **k: (lines, False))
    args = (corpus / "top.tsv.gz", corpus / "dev.en", corpus / "dev.de", work, "en", "de", dict(TINY, max_epoch=3))
    with pytest.raises(TimeCapError, match=rf"time cap max_minutes=30 after {n + 10} updates \(epoch 2 of 3\)"):
        train_nmt(*args, threads=THREADS, seed=3, max_minutes=30)
    assert not (work / "nmt.json").exists()                       # nothing to evaluate
    # fairseq's resume is not byte-identical: the rerun trains from the start (BPE and data kept)
    assert not (work / "checkpoints").exists() and (work / "bin" / ".done").exists()
    state = json.loads((work / "state.json").read_text())
    assert state["train_done"] is False and state["train_seconds"] == 0.0
    shutil.copytree(trained / "checkpoints", work / "checkpoints")   # (the fake fairseq trains nothing)
    train_nmt(*args, threads=THREADS, seed=3, max_minutes=30, on_time_cap="warn")
    info = load_manifest(work)["info"]
    assert info["stopped_by_time"] and "stopped by its time cap max_minutes=30" in info["time_cap"]
