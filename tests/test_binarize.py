"""The NMT data binarized in-process (marginmine.nmt.binarize) is fairseq-preprocess's output byte for
byte: the joined dictionary and the mmap data sets of real sentencepiece-encoded news, with the lines
fairseq treats specially (empty, whitespace runs, ``<unk>`` pieces, dev words the dictionary lacks),
and a dictionary past 65,500 words (uint32 ids instead of uint16)."""

from __future__ import annotations

import filecmp
import logging
from pathlib import Path

import pytest
from fairseq import options  # must import: a missing library fails, never skips
from fairseq_cli import preprocess as fairseq_preprocess

from marginmine.nmt.binarize import binarize, binarize_file, build_dictionary, words
from marginmine.nmt.data import _learn_spm, spm_encode_file
from marginmine.nmt.params import resolve_params

SPECIAL_LINES = ["", "   ", "<unk> <unk>", "a\t\tb  c ", "<s> </s> <pad>", "madeupword0000 x"]


def fairseq_bin(pieces: Path, dest: Path, src: str, tgt: str) -> None:
    """fairseq-preprocess itself (in this process, one worker), as nmt/data.py called it before."""
    args = options.get_preprocessing_parser().parse_args(
        ["--source-lang", src, "--target-lang", tgt, "--trainpref", str(pieces / "train"),
         "--validpref", str(pieces / "valid"), "--destdir", str(dest), "--joined-dictionary", "--workers", "1"])
    fairseq_preprocess.main(args)
    logging.getLogger().handlers.clear()  # fairseq's main() adds a file handler to the root logger


def assert_same_files(ours: Path, theirs: Path) -> None:
    names = sorted(p.name for p in theirs.iterdir() if p.name != "preprocess.log")
    assert sorted(p.name for p in ours.iterdir()) == names
    assert len(names) == 10  # two dictionaries, {train, valid} x {src, tgt} x {.bin, .idx}
    different = [n for n in names if not filecmp.cmp(ours / n, theirs / n, shallow=False)]
    assert not different, different


@pytest.fixture(scope="module")
def pieces(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """newstest2013 (train) and 500 lines of newstest2014 (valid), en-de, in 1,000 joint BPE pieces."""
    d = tmp_path_factory.mktemp("pieces")
    news = real_data / "wmt-newstest-ende"
    for split, year, n in (("train", 2013, None), ("valid", 2014, 500)):
        for lang in ("en", "de"):
            lines = (news / f"newstest{year}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            (d / f"raw.{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    import sentencepiece as spm

    _learn_spm([d / "raw.train.en", d / "raw.train.de"], d / "spm", resolve_params({"bpe_vocab": 1000}), 1)
    sp = spm.SentencePieceProcessor(model_file=str(d / "spm.model"))
    for split in ("train", "valid"):
        for lang in ("en", "de"):
            spm_encode_file(sp, d / f"raw.{split}.{lang}", d / f"{split}.{lang}")
            with open(d / f"{split}.{lang}", "a", encoding="utf-8") as fh:
                fh.write("".join(line + "\n" for line in SPECIAL_LINES))
    return d


def test_real_news_binarizes_to_fairseq_preprocess_bytes(pieces: Path, tmp_path: Path) -> None:
    fairseq_bin(pieces, tmp_path / "fairseq", "en", "de")
    size = binarize(pieces, tmp_path / "ours", "en", "de")
    assert_same_files(tmp_path / "ours", tmp_path / "fairseq")
    assert size % 8 == 0 and 1000 <= size < 65500
    assert (tmp_path / "ours" / "train.en-de.en.idx").read_bytes()[9:18] == b"\x01" + bytes(7) + b"\x08"  # uint16
    # written in chunks of a few lines: the same bytes
    index = {w: i for i, (w, _) in enumerate(build_dictionary([pieces / "train.en", pieces / "train.de"]))}
    binarize_file(pieces / "train.en", tmp_path / "chunked", index, chunk_lines=7)
    for ext in (".bin", ".idx"):
        assert (tmp_path / f"chunked{ext}").read_bytes() == (tmp_path / "ours" / f"train.en-de.en{ext}").read_bytes()
    # the other direction (de as source) names its files by it and keeps the same dictionary
    binarize(pieces, tmp_path / "de-en", "de", "en")
    assert (tmp_path / "de-en" / "dict.de.txt").read_bytes() == (tmp_path / "ours" / "dict.de.txt").read_bytes()
    valid = (pieces / "valid.de").read_text(encoding="utf-8").splitlines()
    unseen = {w for line in valid for w in words(line)} - {w for w, _ in build_dictionary(
        [pieces / "train.en", pieces / "train.de"])}
    assert unseen, "the dev set should hold words the dictionary lacks (they become <unk>)"


def test_a_dictionary_past_65500_words_writes_uint32_ids_as_fairseq_does(tmp_path: Path) -> None:
    d = tmp_path / "pieces"
    d.mkdir()
    for split, n in (("train", 7_000), ("valid", 50)):   # 70,000 distinct words, 10 a line
        for lang, off in (("en", 0), ("de", 3)):
            lines = [" ".join(f"w{(10 * i + j + off) % 70_000:05d}" for j in range(10)) + (" x" * (i % 3))
                     for i in range(n)]
            (d / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    fairseq_bin(d, tmp_path / "fairseq", "en", "de")
    size = binarize(d, tmp_path / "ours", "en", "de")
    assert size > 65500
    assert (tmp_path / "ours" / "train.en-de.en.idx").read_bytes()[17:18] == b"\x09"  # uint32
    assert_same_files(tmp_path / "ours", tmp_path / "fairseq")
