"""The resumable-output helper (marginmine.io.resume): a state saved between pieces survives a kill
and the rerun continues from it; a changed fingerprint or a torn part restarts from scratch and
says so; the output appears only at the finish, complete, and the state goes with it."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marginmine.errors import InputError
from marginmine.io.resume import Resumable, StateFile, changed, part_path, state_path

log = logging.getLogger("test_resume")


class Killed(Exception):
    pass


def write_pieces(out: Path, pieces: list[str], fingerprint: object, kill_after: int | None = None,
                 also: Path | None = None) -> list[str]:
    """A small writer in the helper's pattern: one piece per line, appended and recorded; ``also``
    gets each piece upper-cased in step. Raises ``Killed`` after ``kill_after`` pieces of this call.
    Returns the pieces written by this call."""
    job = Resumable(out, fingerprint, "writing", log, also=(also,) if also else ())

    def torn(state: dict) -> str | None:
        size = job.part.stat().st_size
        return None if size >= state["bytes"] else f"{job.part.name} holds less than its state's {state['bytes']} bytes"

    state = job.resume("the pieces", torn)
    done = int(state["done"]) if state else 0
    if state:
        for p in (job.part, *(part_path(a) for a in job.also)):
            os.truncate(p, state["bytes"])
    else:
        for p in (job.part, *(part_path(a) for a in job.also)):
            p.write_text("")
        job.save(done=0, bytes=0)
    written = []
    for n, piece in enumerate(pieces[done:], done + 1):
        if kill_after is not None and len(written) == kill_after:
            with open(job.part, "a") as fh:  # a piece on disk that no state records yet
                fh.write("lost\n")
            raise Killed
        with open(job.part, "a") as fh:
            fh.write(piece + "\n")
        if also:
            with open(part_path(also), "a") as fh:
                fh.write(piece.upper() + "\n")
        written.append(piece)
        job.save(done=n, bytes=job.part.stat().st_size)
    job.finish()
    return written


PIECES = [f"piece {i}" for i in range(10)]
WHOLE = "".join(p + "\n" for p in PIECES)


def test_a_kill_between_pieces_resumes_from_the_state_to_the_same_bytes(tmp_path: Path) -> None:
    out, also = tmp_path / "out.txt", tmp_path / "also.txt"
    with pytest.raises(Killed):
        write_pieces(out, PIECES, {"k": 4}, kill_after=3, also=also)
    assert not out.exists() and not also.exists()                     # nothing under the output's name
    assert json.loads(state_path(out).read_text())["done"] == 3
    assert part_path(out).read_text().endswith("lost\n")             # a piece no state records
    with pytest.raises(Killed):                                       # killed again, further on
        write_pieces(out, PIECES, {"k": 4}, kill_after=4, also=also)
    assert write_pieces(out, PIECES, {"k": 4}, also=also) == PIECES[7:]   # only what was missing
    assert out.read_text() == WHOLE and also.read_text() == WHOLE.upper()
    assert not part_path(out).exists() and not part_path(also).exists() and not state_path(out).exists()


def test_a_changed_fingerprint_restarts_from_scratch_and_says_so(tmp_path: Path, caplog) -> None:
    out = tmp_path / "out.txt"
    with pytest.raises(Killed):
        write_pieces(out, PIECES, {"k": 4}, kill_after=5)
    with caplog.at_level(logging.WARNING, logger="test_resume"):
        assert write_pieces(out, PIECES, {"k": 6}) == PIECES      # every piece again
    assert f"{out}: the pieces changed since the interrupted run: writing from the start" in caplog.text
    assert out.read_text() == WHOLE


def test_a_fingerprint_compares_as_json_gives_it_back(tmp_path: Path, caplog) -> None:
    """A tuple saved comes back a list: the same fingerprint, so the rerun resumes."""
    out = tmp_path / "out.txt"
    with pytest.raises(Killed):
        write_pieces(out, PIECES, {"columns": (0, 1)}, kill_after=5)
    with caplog.at_level(logging.WARNING, logger="test_resume"):
        assert write_pieces(out, PIECES, {"columns": (0, 1)}) == PIECES[5:]
    assert "from the start" not in caplog.text
    assert not changed({"fp": [0, [1, 2]]}, "fp", (0, (1, 2))) and changed({}, "fp", None)
    assert changed({"fp": [0, 1]}, "fp", (1, 0)) and changed({"other": 1}, "fp", 1)


def test_a_torn_part_restarts_from_scratch_and_says_so(tmp_path: Path, caplog) -> None:
    out = tmp_path / "out.txt"
    with pytest.raises(Killed):
        write_pieces(out, PIECES, {"k": 4}, kill_after=5)
    part = part_path(out)
    os.truncate(part, 12)  # less than the state's bytes: a lost write
    with caplog.at_level(logging.WARNING, logger="test_resume"):
        assert write_pieces(out, PIECES, {"k": 4}) == PIECES
    assert "out.txt.part holds less than its state's 40 bytes: writing from the start" in caplog.text
    assert out.read_text() == WHOLE


def test_a_state_without_its_part_is_ignored(tmp_path: Path, caplog) -> None:
    """A kill after the finish's rename, before the state was removed: the next start ignores it."""
    out = tmp_path / "out.txt"
    job = Resumable(out, {"k": 4}, "writing", log)
    job.save(done=7, bytes=70)
    with caplog.at_level(logging.WARNING, logger="test_resume"):
        assert job.resume("the pieces") is None
    assert caplog.text == ""
    job.part.write_text("x\n")
    assert job.resume("the pieces") == {"fingerprint": {"k": 4}, "done": 7, "bytes": 70}


def test_finish_puts_the_output_in_place_in_one_rename_and_removes_the_state(tmp_path: Path) -> None:
    out = tmp_path / "out.npy"
    out.write_text("the old output\n")
    job = Resumable(out, "fp", "writing", log, keep=".npy")
    assert job.part == tmp_path / "out.part.npy" and part_path(tmp_path / "a.tsv.gz") == tmp_path / "a.tsv.gz.part"
    job.part.write_text("the new output\n")
    job.save(done=1)
    inode = job.part.stat().st_ino
    assert out.read_text() == "the old output\n"                   # untouched until the finish
    job.finish()
    assert out.read_text() == "the new output\n" and out.stat().st_ino == inode  # renamed, not copied
    assert not job.part.exists() and not state_path(out).exists()
    with pytest.raises(FileNotFoundError):                          # no part: nothing is put in place
        Resumable(tmp_path / "none.txt", "fp", "writing", log).finish()
    assert not (tmp_path / "none.txt").exists()
    # an output without the kept suffix gets it appended (embed --output x.emb wrote x.emb.part.npy)
    assert part_path(tmp_path / "x.emb", keep=".npy") == tmp_path / "x.emb.part.npy"


def test_the_state_file_is_written_whole_and_a_foreign_one_is_named(tmp_path: Path) -> None:
    states = StateFile(tmp_path / "state.json")
    assert states.read() == {}
    states.write({"b": 1, "a": [1, 2]})
    assert states.path.read_text() == '{\n "a": [\n  1,\n  2\n ],\n "b": 1\n}\n'
    assert states.read() == {"a": [1, 2], "b": 1} and os.listdir(tmp_path) == ["state.json"]  # no temporary left
    states.path.write_text('{"a": ')                                 # not written by marginmine
    with pytest.raises(InputError, match=r"state.json:1: a step's state file: not JSON"):
        states.read()
    states.path.write_text("[1, 2]\n")
    with pytest.raises(InputError, match="state.json: a step's state file: not a JSON object"):
        states.read()
    states.remove()
    states.remove()  # (gone already: no error)
    assert states.read() == {}


def test_the_helper_imports_no_heavy_library() -> None:
    code = "import sys, marginmine.io.resume; print(sorted({'numpy', 'torch'} & set(sys.modules)))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"
