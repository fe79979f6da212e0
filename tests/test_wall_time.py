"""scripts/wall_time.sh (make demo, make published's two parts): one row per invocation with the command's
own exit status, however it ended; a SIGTERM to the script alone stops the command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def test_a_row_run_outside_make_still_names_its_machine(tmp_path: Path) -> None:
    """Without the project's .venv on PATH (a direct call, not make) the row names the machine and
    the summary is written: the script finds marginmine in the .venv beside it."""
    venv = SCRIPT.parents[1] / ".venv" / "bin"
    assert (venv / "marginmine").is_file(), f"{venv}: make setup first"
    bare = {**os.environ, "PATH": "/usr/bin:/bin"}
    tsv = tmp_path / "wall.tsv"
    r = subprocess.run(["bash", SCRIPT, tsv, "I", "true"], env=bare, capture_output=True, text=True)
    assert r.returncode == 0 and "not summarised" not in r.stderr, r.stderr
    assert "core" in rows(tsv)[0]["machine"] and (tmp_path / "wall.md").is_file()


def test_each_part_is_the_sum_of_its_invocations_rows(tmp_path: Path) -> None:
    """A part stopped and continued (a failed invocation, then one that ends it) is one line of the
    summary, its seconds the sum of both rows; the summary is rewritten after every row."""
    tsv = tmp_path / "wall.tsv"
    r = subprocess.run(["bash", SCRIPT, tsv, "II", "bash", "-c", "sleep 1; exit 1"],
                       env=ENV, capture_output=True, text=True)
    assert r.returncode == 1 and "not summarised" not in r.stderr
    summary = (tmp_path / "wall.md").read_text()
    assert "| II | 1 |" in summary and "| no | 1 |" in summary
    subprocess.run(["bash", SCRIPT, tsv, "II", "sleep", "2"], env=ENV, check=True)
    subprocess.run(["bash", SCRIPT, tsv, "III", "true"], env=ENV, check=True)
    seconds = [int(r["seconds"]) for r in rows(tsv)]
    text = (tmp_path / "wall.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("| II |"))
    assert line.split(" | ")[1:5] == ["2", str(seconds[0] + seconds[1]), f"{(seconds[0] + seconds[1]) / 60:.1f}", "yes"]
    assert f"All parts: {sum(seconds)} s" in text and "mixed" not in line


def test_a_part_on_two_machines_is_marked_and_other_names_get_md_appended(tmp_path: Path) -> None:
    times = tmp_path / "times"  # no .tsv suffix: the summary is times.md, never the rows' own file
    times.write_text("part\tstarted\tended\tseconds\texit\tmachine\n"
                     "I\t2026-01-01T00:00:00Z\t2026-01-01T00:01:00Z\t60\t1\tEPYC, 2 cores, avx2\n"
                     "I\t2026-01-02T00:00:00Z\t2026-01-02T00:02:00Z\t120\t0\tXeon, 2 cores, avx512f\n")
    subprocess.run(["bash", SCRIPT, times, "II", "true"], env=ENV, check=True)
    text = (tmp_path / "times.md").read_text()
    assert "| I | 2 | 180 | 3.0 | yes | 1, 0 | **mixed:** EPYC, 2 cores, avx2; Xeon, 2 cores, avx512f |" in text
    assert len(rows(times)) == 3


@pytest.mark.parametrize("content, message", [
    (None, ": cannot be read"),
    ("", ": is empty"),
    ("part\tseconds\n", ":1: not a wall-times table"),
    ("part\tstarted\tended\tseconds\texit\tmachine\nI\ta\tb\tten\t0\tm\n", ":2: seconds 'ten' is not an integer"),
    ("part\tstarted\tended\tseconds\texit\tmachine\nI\ta\tb\t-5\t0\tm\n", ":2: seconds -5 is below 0"),
    ("part\tstarted\tended\tseconds\texit\tmachine\nI\ta\tb\t5\t\u00b2\tm\n", ":2: exit '\u00b2' is not an integer"),
    ("part\tstarted\tended\tseconds\texit\tmachine\nI\ta\tb\t5\n", ":2: 4 columns, 6 expected"),
])
def test_a_bad_wall_times_table_is_one_line_naming_the_file(tmp_path: Path, content: str | None, message: str) -> None:
    tsv = tmp_path / "wall.tsv"
    if content is not None:
        tsv.write_text(content, encoding="utf-8")
    r = subprocess.run(["marginmine", "wall-times", tsv, "--md", tmp_path / "w.md"],
                       env=ENV, capture_output=True, text=True)
    assert r.returncode == 2 and f"{tsv}{message}" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "w.md").exists()


def test_a_row_that_cannot_be_summarised_removes_the_stale_summary(tmp_path: Path) -> None:
    tsv = tmp_path / "wall.tsv"
    subprocess.run(["bash", SCRIPT, tsv, "I", "true"], env=ENV, check=True)
    assert (tmp_path / "wall.md").exists()
    with tsv.open("a") as f:
        f.write("I\tx\ty\tnot-a-number\t0\tm\n")  # e.g. a hand edit
    r = subprocess.run(["bash", SCRIPT, tsv, "I", "true"], env=ENV, capture_output=True, text=True)
    assert r.returncode == 0 and "not summarised" in r.stderr and not (tmp_path / "wall.md").exists()
    assert len(rows(tsv)) == 3  # the new row is kept


def _run(tmp_path: Path, command: list[str]) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """The script over ``command`` in a session of its own; the command writes its pid first."""
    tsv, pid = tmp_path / "wall.tsv", tmp_path / "pid"
    script = f"echo $$ > {pid}; exec " + " ".join(command)
    p = subprocess.Popen(["bash", SCRIPT, tsv, "I", "bash", "-c", script], env=ENV, start_new_session=True)
    for _ in range(100):
        if pid.exists() and pid.read_text().strip():
            break
        time.sleep(0.05)
    time.sleep(0.3)
    return p, tsv, pid


def _gone(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
    except ProcessLookupError:
        return True
    return False


def test_a_sigterm_to_the_script_alone_stops_the_command_and_records_its_status(tmp_path: Path) -> None:
    """`kill` of make reaches this script only (make's child): the command must stop too, not run on
    for hours, and the row must hold the command's status (here: ended by the SIGTERM, 143)."""
    p, tsv, pid = _run(tmp_path, ["sleep", "60"])
    t0 = time.monotonic()
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait(timeout=20) == 143 and time.monotonic() - t0 < 10 and _gone(pid)
    (row,) = rows(tsv)
    assert row["exit"] == "143" and int(row["seconds"]) < 10


def test_a_command_that_handles_the_signal_is_recorded_with_its_own_status(tmp_path: Path) -> None:
    """A command that ends cleanly on SIGTERM (as Snakemake does) is recorded with its status, not 143."""
    p, tsv, pid = _run(tmp_path, ["bash", "-c", "'trap \"exit 0\" TERM; sleep 60 & wait'"])
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait(timeout=20) == 0
    assert rows(tsv)[0]["exit"] == "0"


def test_ctrl_c_and_a_signal_to_the_group_reach_the_command(tmp_path: Path) -> None:
    for sig, status in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        p, tsv, pid = _run(tmp_path, ["sleep", "60"])
        os.killpg(p.pid, sig)  # a Ctrl-C at the terminal, or `kill -- -PGID`
        assert p.wait(timeout=20) == status and _gone(pid), sig
        assert rows(tsv)[-1]["exit"] == str(status)
        tsv.unlink()


def test_bad_usage_is_one_line(tmp_path: Path) -> None:
    r = subprocess.run(["bash", SCRIPT, tmp_path / "t.tsv", "I"], env=ENV, capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("usage: scripts/wall_time.sh")
