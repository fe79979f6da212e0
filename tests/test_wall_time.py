"""scripts/wall_time.sh (make seeds' two parts): one row per invocation, whatever way it ends, and
the command's exit status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "wall_time.sh"
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def rows(tsv: Path) -> list[dict[str, str]]:
    header, *lines = tsv.read_text().splitlines()
    return [dict(zip(header.split("\t"), x.split("\t"))) for x in lines]


def test_a_row_per_invocation_with_the_exit_status_and_machine(tmp_path: Path) -> None:
    tsv = tmp_path / "times" / "wall.tsv"
    assert subprocess.run(["bash", SCRIPT, tsv, "I: one", "sleep", "1"], env=ENV).returncode == 0
    assert subprocess.run(["bash", SCRIPT, tsv, "II", "bash", "-c", "exit 3"], env=ENV).returncode == 3
    got = rows(tsv)
    assert [(r["part"], r["exit"]) for r in got] == [("I: one", "0"), ("II", "3")]
    assert int(got[0]["seconds"]) in (1, 2) and got[0]["started"] < got[1]["ended"]
    assert "core" in got[0]["machine"]  # marginmine.machine, not "unknown"


def test_a_terminated_run_is_recorded_and_its_command_stopped(tmp_path: Path) -> None:
    tsv = tmp_path / "wall.tsv"
    p = subprocess.Popen(["bash", SCRIPT, tsv, "I", "sleep", "60"], env=ENV, start_new_session=True)
    time.sleep(1.0)
    os.killpg(p.pid, signal.SIGTERM)  # as a lost session or `kill -- -PGID` stops the group
    assert p.wait(timeout=30) == 143
    (row,) = rows(tsv)
    assert row["exit"] == "143" and int(row["seconds"]) < 30


def test_bad_usage_is_one_line(tmp_path: Path) -> None:
    r = subprocess.run(["bash", SCRIPT, tmp_path / "t.tsv", "I"], env=ENV, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("usage: scripts/wall_time.sh")
