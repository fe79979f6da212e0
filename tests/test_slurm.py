"""The workflow on a real single-node SLURM (scripts/slurm_test.sh): the preprocess slice of the
smoke config through --profile profiles/slurm, every job proven COMPLETED by sacct.

Needs root and apt-get (it installs slurm-wlm, munge, slurmdbd and mariadb-server when absent and
starts the daemons by hand); about 2 minutes with the packages present, 3 without."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slurm
def test_preprocess_slice_runs_through_slurm(real_data: Path, tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("the real SLURM test needs root and apt-get (run `make slurm-test` on such a machine)")
    env = {**os.environ, "MARGINMINE_DATA_DIR": str(real_data), "SLURM_TEST_DIR": str(tmp_path / "run"),
           "SLURM_TEST_TIMEOUT": "900"}
    r = subprocess.run(["bash", str(REPO / "scripts/slurm_test.sh")], capture_output=True, text=True,
                       timeout=1200, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "COMPLETED" in out and "rule_preprocess_shard" in out, out[-4000:]
