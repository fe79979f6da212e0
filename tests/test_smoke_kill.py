"""The smoke experiment killed three times by process group - during encoder training, embedding and
NMT training - and rerun as ``make demo`` does (stale lock cleared, same command), from an empty
copy of the workflow to the ratio system's BLEU; it must end with the same bytes as the
uninterrupted smoke run (tests/test_smoke.py). tests/test_kill.py kills single commands.

A module of its own so that ``pytest -n 2 --dist loadfile`` runs it on the other worker while the
uninterrupted run is being built: it asks for that run (shared by the workers, tests/conftest.py)
only to compare, at its end.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from smokerun import (KILLED_TARGETS, ONE_SYSTEM, final_outputs, nmt_checkpoint_exists, run_until, running_for,
                      shared_smoke, smoke_command)
from test_workflow import copy_workflow, snakemake


@pytest.mark.slow
@pytest.mark.workflow
def test_smoke_run_killed_three_times_ends_byte_identical(real_data: Path, tmp_path: Path,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    d = tmp_path / "killed"
    d.mkdir()
    copy_workflow(d)
    log = tmp_path / "snakemake.log"
    moments = [("encoder training", running_for("train-encoder", 10)),
               ("embedding", running_for("embed", 0.5)),
               ("NMT training", nmt_checkpoint_exists(d))]
    for what, moment in moments:
        assert run_until(d, real_data, log, moment) == "killed", what
        assert (d / ".snakemake/locks").is_dir() and any((d / ".snakemake/locks").iterdir()), \
            f"killed during {what}, Snakemake left no lock: this test would not show that it is cleared"
    assert run_until(d, real_data, log, None) == "finished"
    smoke = shared_smoke(tmp_path_factory, real_data)  # waits for the uninterrupted run if it is not done
    ref = final_outputs(smoke, (("ratio", 1),), tables=False)
    got = final_outputs(d, (("ratio", 1),), tables=False)
    assert set(got) == set(ref) and len(ref) == 22, sorted(ref)
    different = sorted(k for k in ref if ref[k] != got[k])
    assert not different, different
    r = snakemake("-n", *smoke_command(real_data, overlay=ONE_SYSTEM, targets=KILLED_TARGETS), cwd=d)
    assert "Nothing to be done" in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
