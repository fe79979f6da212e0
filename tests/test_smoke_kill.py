"""The smoke experiment killed three times by process group - during encoder training, embedding
and NMT training - and rerun as ``make demo`` does (the stale lock cleared, the same command): it
ends with the bytes of the uninterrupted run (the ``smoke`` fixture, tests/conftest.py) and the same
NMT parameters, and a further run has nothing to do. tests/test_kill.py kills single commands.

A file of its own, so that the pytest worker that is not running the published scorers' suite on
the same smoke run (tests/test_smoke_published.py) can take it (make test: the worker that built the
smoke run and checked it, tests/test_smoke.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from smokerun import (
    DOWNSTREAM_OF_THE_ENCODER,
    KILLED_TARGETS,
    ONE_SYSTEM,
    final_outputs,
    nmt_checkpoint_exists,
    run_until,
    running_for,
    smoke_command,
)
from test_workflow import snakemake


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
    ref, got = final_outputs(smoke, (("ratio", 1),), decoded=False), final_outputs(d, (("ratio", 1),), decoded=False)
    assert set(got) == set(ref), sorted(set(got) ^ set(ref))
    for kind in (".scores.tsv.gz", ".npy", "kept/shard", "encoder/model.pt", "select/ratio.2k", "(parameters)"):
        assert sum(kind in k for k in ref) >= 1, (kind, sorted(ref))
    different = sorted(k for k in ref if ref[k] != got[k])
    assert not different, different
    r = snakemake("-n", *smoke_command(real_data, overlay=ONE_SYSTEM, targets=KILLED_TARGETS), cwd=d)
    assert "Nothing to be done" in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
