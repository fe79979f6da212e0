"""The selection-method comparison: table rows from evaluate reports, Markdown, plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marginmine.cli import main
from marginmine.comparison import read_row
from marginmine.errors import InputError


def fake_report(root: Path, method: str, n: str, test: float, dev: float | None, pairs: int) -> Path:
    d = root / f"{method}.{n}"
    d.mkdir(parents=True)
    obj = {"bleu": test, "test": {"bleu": test, "tok_bleu": test + 1},
           "dev": {"bleu": dev, "tok_bleu": dev} if dev is not None else None,
           "extra": {"newstest2014": {"bleu": test / 10, "tok_bleu": 0.0}}, "meta": {"train_pairs": pairs}}
    (d / "bleu.json").write_text(json.dumps(obj))
    return d / "bleu.json"


def test_compare_writes_sorted_table_markdown_and_plot(tmp_path: Path) -> None:
    files = [fake_report(tmp_path, "ratio", "20k", 9.5, 10.1, 20000), fake_report(tmp_path, "cosine", "20k", 8.0, 8.4, 20000),
             fake_report(tmp_path, "ratio", "5k", 4.0, 4.2, 5000), fake_report(tmp_path, "unfiltered", "20k", 7.0, None, 94659)]
    out = tmp_path / "cmp"
    assert main(["compare", "--inputs", *map(str, files), "--tsv", f"{out}.tsv", "--md", f"{out}.md",
                 "--png", f"{out}.png", "--title", "demo"]) == 0
    rows = [ln.split("\t") for ln in Path(f"{out}.tsv").read_text().splitlines()]
    assert rows[0][:5] == ["method", "N", "pairs", "dev_bleu", "test_bleu"] and rows[0][-1] == "newstest2014_bleu"
    assert [(r[0], r[1]) for r in rows[1:]] == [("ratio", "5k"), ("cosine", "20k"), ("ratio", "20k"), ("unfiltered", "20k")]
    assert rows[3][3:5] == ["10.10", "9.50"] and rows[4][3] == ""
    assert "**9.50**" in Path(f"{out}.md").read_text()
    assert Path(f"{out}.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_refuses_a_report_outside_a_method_directory(tmp_path: Path) -> None:
    bad = tmp_path / "bleu.json"
    bad.write_text("{}")
    with pytest.raises(InputError, match="method"):
        read_row(bad)
