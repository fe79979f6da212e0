"""Crash safety proven by killing: SIGKILL (no cleanup, no signal handler) at real moments, then a
rerun; the final outputs must equal an uninterrupted run's byte for byte.

* ``marginmine score`` killed again and again in the middle of its batches, on real text, resumes
  to the same bytes; a torn ``.part`` (shorter than its state promises) and a changed setting
  between kill and resume restart the file instead of mixing old and new scores.
* (tests/test_nmt_run.py) ``marginmine translate``, translate-then-vote's corpus step, SIGKILLed with
  two chunks on disk, resumes at the first missing chunk to the bytes of an uninterrupted run.
* (tests/test_smoke_kill.py, on the shared smoke run it compares with) The smoke experiment started with
  Snakemake, its whole process group killed while the encoder
  trains, while a shard is embedded and while the NMT system trains (after its first checkpoint),
  each time rerun the way the README's command does (``scripts/unlock_stale.sh`` clears the stale
  lock, as ``make demo`` does); then every final output is compared by SHA-256 with the
  uninterrupted smoke run (the ``smoke`` fixture), and a further run has nothing to do. The killed
  run trains the ratio selection's system only (time); fairseq's resume is not byte-identical, so a
  killed NMT training restarts (``resume_killed: false``) and this test shows the result is.
"""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from doubles import TrigramEncoder
from test_workflow import REPO

# --- one command, killed mid-batch -----------------------------------------------------------


@pytest.fixture(scope="module")
def mono_pairs(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """8,000 real English and German sentences side by side (unrelated: what matters is the
    length), with trigram embeddings as ``marginmine embed`` would store them."""
    en = (real_data / "mono-en-wiki-web/wikitext2.valid+test.sentences.detok.en").read_text().splitlines()[:8000]
    de = (real_data / "mono-de-news/10kGNAD.test.sentences.de").read_text().splitlines()[:8000]
    assert len(en) == len(de) == 8000
    d = tmp_path_factory.mktemp("mono")
    (d / "pairs.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in zip(en, de)), encoding="utf-8")
    enc = TrigramEncoder()
    np.save(d / "en.npy", enc.encode(en, "en").astype(np.float16))
    np.save(d / "de.npy", enc.encode(de, "de").astype(np.float16))
    return d / "pairs.tsv", d / "en.npy", d / "de.npy"


def score_argv(pairs: Path, x: Path, y: Path, out: Path, k: int = 4) -> list[str]:
    return [sys.executable, "-m", "marginmine.cli.main", "score", "--input", str(pairs), "--src-embeddings", str(x),
            "--tgt-embeddings", str(y), "--scorers", "ratio,distance", "-k", str(k), "--batch-size", "250",
            "--threads", "1", "--output", str(out)]


def state_lines(out: Path) -> int:
    state = out.with_name(out.name + ".state.json")
    try:
        return int(json.loads(state.read_text())["lines"])
    except (OSError, ValueError, KeyError):
        return 0


def kill_after_progress(argv: list[str], out: Path, beyond: int) -> int:
    """Start ``argv``; SIGKILL it as soon as its state file shows more than ``beyond`` lines done.
    Returns the lines done at the kill (or -1 when it finished first)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while proc.poll() is None:
            done = state_lines(out)
            if done > beyond:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return done
            time.sleep(0.002)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    return -1


def test_scoring_killed_mid_run_again_and_again_resumes_to_the_same_bytes(mono_pairs, tmp_path: Path) -> None:
    pairs, x, y = mono_pairs
    ref = tmp_path / "ref.scores.tsv.gz"
    subprocess.run(score_argv(pairs, x, y, ref), check=True, capture_output=True)
    out = tmp_path / "out.scores.tsv.gz"
    kills = []
    for beyond in (1000, 3500, 6000):  # three kills, each after new progress, mid-run
        kills.append(kill_after_progress(score_argv(pairs, x, y, out), out, beyond))
        assert beyond < kills[-1] < 8000 and not out.exists(), kills
    assert kill_after_progress(score_argv(pairs, x, y, out), out, 8000) == -1  # the rerun finishes
    assert out.read_bytes() == ref.read_bytes()
    assert not out.with_name(out.name + ".part").exists() and not out.with_name(out.name + ".state.json").exists()


def test_torn_part_and_changed_settings_restart_instead_of_mixing(mono_pairs, tmp_path: Path) -> None:
    pairs, x, y = mono_pairs
    out = tmp_path / "out.scores.tsv.gz"
    part = out.with_name(out.name + ".part")
    # torn: the state promises more bytes than the part file holds (a lost write)
    assert kill_after_progress(score_argv(pairs, x, y, out), out, 1000) > 1000
    with open(part, "r+b") as fh:
        fh.truncate(part.stat().st_size // 2)
    r = subprocess.run(score_argv(pairs, x, y, out), capture_output=True, text=True, check=True)
    assert "scoring from the start" in r.stderr
    ref = tmp_path / "ref.scores.tsv.gz"
    subprocess.run(score_argv(pairs, x, y, ref), check=True, capture_output=True)
    assert out.read_bytes() == ref.read_bytes()
    # changed between kill and resume: k 4 -> 6 gives the k = 6 file, no k = 4 batch kept
    out.unlink()
    assert kill_after_progress(score_argv(pairs, x, y, out), out, 1000) > 1000
    r = subprocess.run(score_argv(pairs, x, y, out, k=6), capture_output=True, text=True, check=True)
    assert "changed since the interrupted run" in r.stderr
    ref6 = tmp_path / "ref6.scores.tsv.gz"
    subprocess.run(score_argv(pairs, x, y, ref6, k=6), check=True, capture_output=True)
    assert out.read_bytes() == ref6.read_bytes() != ref.read_bytes()
    assert gzip.decompress(out.read_bytes()).count(b"\n") == 8000 + 1  # the header names the columns


def test_stale_lock_is_cleared_only_when_no_snakemake_runs_there(tmp_path: Path) -> None:
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("x\n")
    script = REPO / "scripts/unlock_stale.sh"
    # a live process that looks like snakemake (argv[0] .../bin/snakemake) working in that directory
    live = subprocess.Popen(["bash", "-c", "exec -a /venv/bin/snakemake sleep 60"], cwd=tmp_path)
    try:
        time.sleep(0.2)
        r = subprocess.run(["bash", str(script), str(tmp_path)], capture_output=True, text=True, check=True)
        assert "its lock is kept" in r.stderr and (locks / "0.input.lock").exists()
    finally:
        live.kill()
        live.wait()
    r = subprocess.run(["bash", str(script), str(tmp_path)], capture_output=True, text=True, check=True)
    assert "removing a stale Snakemake lock" in r.stderr and not any(locks.iterdir())
    r = subprocess.run(["bash", str(script), str(tmp_path)], capture_output=True, text=True, check=True)
    assert r.stderr == ""  # nothing to clear: silent
    make = subprocess.run(["make", "-n", "demo"], cwd=REPO, capture_output=True, text=True)
    assert "scripts/unlock_stale.sh" in make.stdout  # what `make demo` runs first
