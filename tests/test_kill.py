"""Crash safety proven by killing: SIGKILL (no cleanup, no signal handler) at real moments, then a
rerun; the final outputs must equal an uninterrupted run's byte for byte.

* ``marginmine score`` killed again and again in the middle of its batches, on real text, resumes
  to the same bytes; a torn ``.part`` (shorter than its state promises) and a changed setting
  between kill and resume restart the file instead of mixing old and new scores.
* The smoke experiment started with Snakemake, its whole process group killed while the encoder
  trains, while a shard is embedded and while the NMT system trains (after its first checkpoint),
  each time rerun the way the README's command does (``scripts/unlock_stale.sh`` clears the stale
  lock, as ``make demo`` does); then every final output is compared by SHA-256 with the
  uninterrupted smoke run (tests/test_smoke.py), and a further run has nothing to do. The killed
  run trains the ratio selection's system only (time); fairseq's resume is not byte-identical, so a
  killed NMT training restarts (``resume_killed: false``) and this test shows the result is.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from doubles import TrigramEncoder

from smokerun import final_outputs, smoke_command
from test_workflow import REPO, SNAKEMAKE, snakemake

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
    return [sys.executable, "-m", "marginmine.cli", "score", "--input", str(pairs), "--src-embeddings", str(x),
            "--tgt-embeddings", str(y), "--margin", "ratio,distance", "-k", str(k), "--batch-size", "250",
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
    assert gzip.decompress(out.read_bytes()).count(b"\n") == 8000


# --- the smoke experiment, killed by process group ------------------------------------------


def group_commands(pgid: int) -> list[str]:
    """Command lines of the live processes in process group ``pgid``."""
    out = []
    for p in Path("/proc").glob("[0-9]*"):
        try:
            if os.getpgid(int(p.name)) != pgid:
                continue
            if (p / "stat").read_text().rpartition(")")[2].split()[0] == "Z":
                continue  # dead, waiting for its parent (init) to reap it
            out.append((p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, ProcessLookupError, IndexError):
            continue
    return out


#: what encoder training and every later step write (Snakemake reruns a producer only when some
#: target needs its output, so all of it goes)
DOWNSTREAM_OF_THE_ENCODER = ("results/test/encoder", "work/test/encoders", "results/test/encoders", "work/test/embed",
                             "work/test/score", "work/test/select", "results/test/select", "results/test/mining",
                             "results/test/filtering", "work/test/nmt", "results/test/nmt", "results/test/report",
                             "results/test/comparison.*", "results/test/bleu_2k.*")

#: the killed run trains one NMT system (the ratio selection's) to keep the suite within its time;
#: everything it writes is compared with the uninterrupted two-system run
ONE_SYSTEM = "selection={sizes: [2k], methods: [ratio]}"


def run_until(d: Path, real_data: Path, log: Path, moment: Callable[[list[str]], bool] | None,
              timeout: float = 1500) -> str:
    """The README's rerun (clear a stale lock, then the same snakemake command) in ``d``; with
    ``moment``, SIGKILL its whole process group when ``moment(commands of the group)`` holds.
    Returns 'killed' or 'finished'."""
    subprocess.run(["bash", str(REPO / "scripts/unlock_stale.sh"), str(d)], check=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    with open(log, "a") as fh:
        proc = subprocess.Popen([SNAKEMAKE, *smoke_command(real_data, ONE_SYSTEM)], cwd=d, env=env, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        try:
            while proc.poll() is None:
                if moment is not None and moment(group_commands(proc.pid)):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    for _ in range(100):  # SIGKILL is delivered asynchronously
                        if not group_commands(proc.pid):
                            break
                        time.sleep(0.05)
                    assert not group_commands(proc.pid), "a process of the killed group survived"
                    return "killed"
                if time.monotonic() - t0 > timeout:
                    raise TimeoutError(f"smoke run in {d} took more than {timeout} s")
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, log.read_text()[-4000:]
    return "finished"


def running_for(name: str, seconds: float) -> Callable[[list[str]], bool]:
    """A moment: a ``marginmine <name>`` job has been running for ``seconds``."""
    seen: dict[str, float] = {}

    def moment(commands: list[str]) -> bool:
        if any(f"marginmine {name} " in c for c in commands):
            seen.setdefault(name, time.monotonic())
            return time.monotonic() - seen[name] >= seconds
        return False
    return moment


def nmt_checkpoint_exists(d: Path) -> Callable[[list[str]], bool]:
    """A moment: an NMT system is training and has saved a checkpoint (so the rerun resumes)."""
    def moment(commands: list[str]) -> bool:
        return (any("marginmine train-nmt " in c for c in commands)
                and any(d.glob("work/test/nmt/*/checkpoints/checkpoint_last.pt")))
    return moment


@pytest.mark.slow
@pytest.mark.workflow
def test_smoke_run_killed_three_times_ends_byte_identical(smoke: Path, real_data: Path, tmp_path: Path) -> None:
    # the uninterrupted run up to preprocessing (corpus, shards, dev/test slices, encoder data), then
    # everything from encoder training on runs again (its outputs gone), killed three times
    d = tmp_path / "killed"
    shutil.copytree(smoke, d, symlinks=True)
    for gone in DOWNSTREAM_OF_THE_ENCODER:
        for p in d.glob(gone):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    assert not (d / "results/test/encoder").exists() and (d / "work/test/preprocess/kept/shard0000.tsv.gz").exists()
    log = tmp_path / "snakemake.log"
    moments = [("encoder training", running_for("train-encoder", 10)),
               ("embedding", running_for("embed", 0.5)),
               ("NMT training", nmt_checkpoint_exists(d))]
    for what, moment in moments:
        assert run_until(d, real_data, log, moment) == "killed", what
        assert (d / ".snakemake/locks").is_dir() and any((d / ".snakemake/locks").iterdir()), \
            f"killed during {what}, Snakemake left no lock: this test would not show that it is cleared"
    assert run_until(d, real_data, log, None) == "finished"
    ref, got = final_outputs(smoke, ("ratio",)), final_outputs(d, ("ratio",))
    assert set(got) == set(ref) and len(ref) == 16, sorted(ref)
    different = sorted(k for k in ref if ref[k] != got[k])
    assert not different, different
    r = snakemake("-n", *smoke_command(real_data, ONE_SYSTEM), cwd=d)
    assert "Nothing to be done" in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]


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
