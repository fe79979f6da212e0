"""Encoder training data: every pair kept or counted, leakage removed, Moses text detokenized."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marginmine.cli.main import main
from marginmine.encoders.data import TrainingSource, detokenizer, prepare


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


def test_leakage_and_defects_are_counted_never_silently_dropped(tmp_path: Path) -> None:
    en = _write(tmp_path / "a.en", ["A house.", "The test sentence.", "", "Fine, thanks."])
    de = _write(tmp_path / "a.de", ["Ein Haus.", "Der Testsatz.", "Leer links.", "Gut, danke."])
    protect = _write(tmp_path / "test.en", ["The  test sentence."])        # matched after normalising
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("x\tGut, danke.\n", encoding="utf-8")
    report = prepare([TrainingSource("a", "en", "de", (str(en), str(de)))], tmp_path / "out",
                     [protect], [corpus])
    counts = report["sources"]["a"]
    assert counts["in"] == 4 and counts["kept"] == 1 and counts["leakage"] == 2
    assert sum(v for k, v in counts.items() if k not in ("in", "kept", "files", "notes")) == 3
    assert _read(tmp_path / "out" / "a.en") == ["A house."]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest == [{"name": "a", "src_lang": "en", "tgt_lang": "de", "src": "a.en", "tgt": "a.de",
                         "pairs": 1}]


def test_moses_detokenization_of_real_tokenized_data(real_data: Path, tmp_path: Path) -> None:
    d = real_data / "opennmt-toy-ende"
    en = _read(d / "src-train.txt")[:200]
    de = _read(d / "tgt-train.txt")[:200]
    assert any("&apos;" in s for s in en) and any(" , " in s for s in de)   # the input is tokenized
    src = _write(tmp_path / "t.en", en)
    tgt = _write(tmp_path / "t.de", de)
    report = prepare([TrainingSource("t", "en", "de", (str(src), str(tgt)), detokenize="moses")],
                     tmp_path / "out", [])
    assert report["sources"]["t"]["kept"] == 200
    out_en, out_de = _read(tmp_path / "out" / "t.en"), _read(tmp_path / "out" / "t.de")
    assert "Parliament's legislative prerogative" in out_en[0] and out_en[0].endswith("in advance.")
    assert not any("&apos;" in s or "&quot;" in s or " , " in s for s in out_en + out_de)
    assert out_de[0].startswith("Es geht nicht an, dass")


def test_detokenizer_identity_and_unknown_kind() -> None:
    assert detokenizer(None, "en")("it &apos;s , fine") == "it &apos;s , fine"
    assert detokenizer("moses", "en")("it &apos;s , fine .") == "it's, fine."
    with pytest.raises(ValueError, match="moses"):
        detokenizer("spacy", "en")


def test_cli_passes_the_detokenize_option(tmp_path: Path) -> None:
    en = _write(tmp_path / "a.en", ["it &apos;s raining , isn &apos;t it ?"])
    de = _write(tmp_path / "a.de", ["es regnet , nicht wahr ?"])
    spec = [{"name": "tok", "src_lang": "en", "tgt_lang": "de", "files": [str(en), str(de)],
             "detokenize": "moses"},
            {"name": "raw", "src_lang": "en", "tgt_lang": "de", "files": [str(en), str(de)]}]
    assert main(["encoder-data", "--sources", json.dumps(spec), "--outdir", str(tmp_path / "out")]) == 0
    assert _read(tmp_path / "out" / "tok.en") == ["it's raining, isn't it?"]
    assert _read(tmp_path / "out" / "tok.de") == ["es regnet, nicht wahr?"]
    assert _read(tmp_path / "out" / "raw.en") == ["it &apos;s raining , isn &apos;t it ?"]
