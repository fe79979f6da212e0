"""Workflow edge cases (issue 17, item 4): a missing data directory or protect file fails at
planning with one line naming the config key and the path."""

from __future__ import annotations

from pathlib import Path

from test_workflow import plan_demo_with


def error_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if "does not exist" in ln]


def test_missing_protect_file_fails_at_planning(tmp_path: Path) -> None:
    r = plan_demo_with(tmp_path, lambda cfg: cfg["protect"].append("wmt-newstest-ende/newstest2031.de"))
    assert r.returncode != 0
    lines = error_lines(r.stdout + r.stderr)
    assert lines and "protect: 'wmt-newstest-ende/newstest2031.de' is neither an eval set" in lines[0], lines
    assert "shared/data/wmt-newstest-ende/newstest2031.de does not exist" in lines[0]


def test_missing_data_dir_fails_at_planning(tmp_path: Path) -> None:
    missing = tmp_path / "no such data"
    r = plan_demo_with(tmp_path, lambda cfg: cfg.update(data_dir=str(missing)))
    assert r.returncode != 0
    lines = error_lines(r.stdout + r.stderr)
    assert lines and f"data_dir: {missing} does not exist (or is not a directory), but corpus.source reads" \
        in lines[0], lines


def test_missing_local_source_file_names_its_key(tmp_path: Path) -> None:
    def change(cfg: dict) -> None:
        cfg["eval"]["extra"]["multi30k-flickr2016"]["src"] = "multi30k/test_2061_flickr.en.gz"

    r = plan_demo_with(tmp_path, change)
    assert r.returncode != 0
    lines = error_lines(r.stdout + r.stderr)
    assert lines and "eval.multi30k-flickr2016: " in lines[0] and "multi30k/test_2061_flickr.en.gz" in lines[0], lines
