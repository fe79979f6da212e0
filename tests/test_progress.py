"""Progress output: log lines in log files, a tqdm bar on a terminal."""

from __future__ import annotations

import logging

import pytest

from marginmine.io.progress import Progress


def test_progress_logs_lines_when_not_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="marginmine.io.progress")
    prog = Progress("work", every=0.0, total=3, unit="shards", bar=False)
    for _ in range(3):
        prog.tick()
    prog.done()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("work: 1/3 shards") and lines[-1].startswith("work: 3 shards in")


def test_progress_draws_a_bar_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    prog = Progress("bar", total=10, bar=True)
    prog.tick(10)
    prog.done()
    err = capsys.readouterr().err
    assert "bar: 100%" in err and "10.0/10.0" in err
