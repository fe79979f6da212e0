"""Filtered corpora in the formats they travel in (marginmine export-filtered), on real pairs."""

from __future__ import annotations

import gzip

import pytest

from marginmine.cli.main import main
from marginmine.errors import InputError
from marginmine.scoring.export import export_filtered


@pytest.fixture()
def selection(tmp_path, real_data):
    """A selection as `select` writes it for a corpus TSV (url, en, de, note; sentences in 1 and 2)."""
    en = (real_data / "wmt-newstest-ende/newstest2013.en").read_text(encoding="utf-8").splitlines()[:50]
    de = (real_data / "wmt-newstest-ende/newstest2013.de").read_text(encoding="utf-8").splitlines()[:50]
    p = tmp_path / "ratio.50.tsv.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        for i, (a, b) in enumerate(zip(en, de)):
            fh.write(f"{a}\t{b}\t{1.5 - i / 100:.6f}\thttp://x/{i}\tnote {i}\n")
    return p, en, de


def test_columns_back_in_corpus_order_score_last(selection, tmp_path):
    p, en, de = selection
    n = export_filtered(p, tmp_path / "f.tsv.gz", tmp_path / "f.en", tmp_path / "f.de", (1, 2))
    assert n == 50
    rows = [line.split("\t") for line in gzip.open(tmp_path / "f.tsv.gz", "rt", encoding="utf-8").read().splitlines()]
    assert rows[3] == ["http://x/3", en[3], de[3], "note 3", "1.470000"]
    assert (tmp_path / "f.en").read_text(encoding="utf-8").splitlines() == en
    assert (tmp_path / "f.de").read_text(encoding="utf-8").splitlines() == de
    # target before source in the corpus (columns 3, 1)
    export_filtered(p, tmp_path / "g.tsv", tmp_path / "g.en", tmp_path / "g.de", (3, 1))
    first = (tmp_path / "g.tsv").read_text(encoding="utf-8").splitlines()[0].split("\t")
    assert first == ["http://x/0", de[0], "note 0", en[0], "1.500000"]


def test_errors_name_file_and_line(selection, tmp_path):
    p, _, _ = selection
    with pytest.raises(InputError, match=r"columns \(1, 7\) do not fit"):
        export_filtered(p, tmp_path / "a.tsv", tmp_path / "a.en", tmp_path / "a.de", (1, 7))
    assert not (tmp_path / "a.tsv").exists()  # nothing half-written
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\t1.0\nonly-one-column\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.tsv:2: 1 columns"):
        export_filtered(bad, tmp_path / "b.tsv", tmp_path / "b.en", tmp_path / "b.de")


def test_cli_never_writes_over_its_input(selection, tmp_path, capsys):
    p, _, _ = selection
    before = p.read_bytes()
    rc = main(["export-filtered", "--selection", str(p), "--tsv", str(p), "--src", str(tmp_path / "s"),
               "--tgt", str(tmp_path / "t")])
    assert rc == 2 and p.read_bytes() == before
    assert main(["export-filtered", "--selection", str(p), "--columns", "x", "--tsv", str(tmp_path / "o"),
                 "--src", str(tmp_path / "s"), "--tgt", str(tmp_path / "t")]) == 2
    assert "--columns" in capsys.readouterr().err
