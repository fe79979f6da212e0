"""Streaming embedding to memory-mapped .npy: chunks, resume after a kill, clear input errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from doubles import TrigramEncoder
from marginmine.encoders.embed import embed_file
from marginmine.encoders.intrinsic import GoldSet, evaluate
from marginmine.errors import InputError


def test_embeds_tsv_column_as_float16(tmp_path: Path) -> None:
    f = tmp_path / "s.tsv.gz"
    with gzip.open(f, "wt", encoding="utf-8") as fh:
        fh.writelines(f"sentence {i}\tSatz {i}\n" for i in range(1000))
    out = embed_file(TrigramEncoder(), "de", f, tmp_path / "s.de.npy", column=1, chunk_size=128)
    arr = np.load(out, mmap_mode="r")
    assert arr.shape == (1000, 64) and arr.dtype == np.float16
    ref = TrigramEncoder().encode([f"Satz {i}" for i in range(1000)], "de")
    assert np.allclose(arr, ref, atol=1e-3)
    assert not list(tmp_path.glob("*.part.npy")) and not list(tmp_path.glob("*.state.json"))


def test_resume_after_kill_continues_from_last_chunk(tmp_path: Path) -> None:
    f = tmp_path / "s.txt"
    f.write_text("".join(f"line number {i}\n" for i in range(1000)))
    with pytest.raises(KeyboardInterrupt):
        embed_file(TrigramEncoder(fail_after=3), "en", f, tmp_path / "o.npy", chunk_size=100)
    assert not (tmp_path / "o.npy").exists() and (tmp_path / "o.npy.state.json").exists()
    enc = TrigramEncoder()
    embed_file(enc, "en", f, tmp_path / "o.npy", chunk_size=100)
    assert enc.calls == 7  # 3 chunks were already complete
    full = embed_file(TrigramEncoder(), "en", f, tmp_path / "fresh.npy", chunk_size=100)
    assert np.array_equal(np.load(tmp_path / "o.npy"), np.load(full))


def test_the_record_names_the_encoder_and_goes_with_its_embeddings(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Beside each output, the encoder's identity, rows and dimension (what a fitted head is checked
    against); an empty shard gets one too; an earlier record is gone as soon as embedding starts
    again (a killed run leaves none), and a record that does not fit its file is not believed."""
    import json

    from marginmine.encoders.embed import embedded_by, provenance_path

    f = tmp_path / "s.txt"
    f.write_text("".join(f"line number {i}\n" for i in range(300)))
    out = embed_file(TrigramEncoder(), "en", f, tmp_path / "o.npy", chunk_size=100, encoder_id="enc-a")
    record = json.loads(provenance_path(out).read_text())
    assert (record["encoder"], record["rows"], record["dim"], record["lang"]) == ("enc-a", 300, 64, "en")
    assert embedded_by(out) == "enc-a" and embedded_by(tmp_path / "none.npy") is None
    (tmp_path / "e.txt").write_text("")
    empty = embed_file(TrigramEncoder(), "en", tmp_path / "e.txt", tmp_path / "e.npy", allow_empty=True,
                       encoder_id="enc-a")
    assert embedded_by(empty) == "enc-a" and json.loads(provenance_path(empty).read_text())["rows"] == 0
    out.unlink()  # rerun (Snakemake removes the output first), killed after 2 chunks: no record left
    with pytest.raises(KeyboardInterrupt):
        embed_file(TrigramEncoder(fail_after=2), "en", f, tmp_path / "o.npy", chunk_size=100, encoder_id="enc-b")
    assert not provenance_path(out).exists()
    embed_file(TrigramEncoder(), "en", f, out, chunk_size=100, encoder_id="enc-b")
    assert embedded_by(out) == "enc-b"
    np.save(out, np.zeros((5, 64), np.float16))  # written otherwise, the record left beside it
    assert embedded_by(out) is None and "not its record" in caplog.text


def test_empty_truncated_and_bad_input(tmp_path: Path) -> None:
    (tmp_path / "e.txt").write_text("")
    with pytest.raises(InputError, match="e.txt: is empty"):
        embed_file(TrigramEncoder(), "en", tmp_path / "e.txt", tmp_path / "e.npy")
    data = gzip.compress(b"a sentence\n" * 50_000)
    (tmp_path / "t.txt.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="t.txt.gz: cannot read"):
        embed_file(TrigramEncoder(), "en", tmp_path / "t.txt.gz", tmp_path / "t.npy")
    (tmp_path / "b.txt").write_bytes(b"ok\nbad \xff\n")
    with pytest.raises(InputError, match="b.txt:2: invalid UTF-8"):
        embed_file(TrigramEncoder(), "en", tmp_path / "b.txt", tmp_path / "b.npy")


def test_intrinsic_evaluation_on_real_tatoeba(real_data: Path) -> None:
    d = real_data / "laser-tatoeba-v1"
    rows = evaluate(TrigramEncoder(), [GoldSet("tatoeba-deu-eng", "de", "en", d / "tatoeba.deu-eng.deu",
                                                d / "tatoeba.deu-eng.eng")])
    by = {r["margin"]: r for r in rows}
    # character trigrams find some cognates/names but are far from a real encoder
    assert 40 < by["cosine"]["err_avg"] < 99.9
    assert by["ratio"]["pairs"] == 1000
