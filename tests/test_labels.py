"""The label sidecar held as id digests (marginmine.io.labels.PairLabels): the same answers as the
rows read into dicts, errors naming file and line, memory per pair bounded."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from marginmine.errors import InputError
from marginmine.io.labels import MAX_GROUPS, UNLABELLED, PairLabels, group_of
from marginmine.io.text import read_label_rows

KINDS = ["misaligned", "partial_joined", "boilerplate", "machine_translated"]
ORIGINS = ["multi30k", "tatoeba", "newstest", "paracrawl"]


def write_sidecar(path: Path, n: int, seed: int = 7) -> list[str]:
    """A sidecar of ``n`` rows with ids as long as the scale corpus' (~90 characters)."""
    rng = random.Random(seed)
    ids = []
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("id\torigin\tkind\tclean\n")
        for i in range(n):
            clean = rng.random() < 0.3
            kind = "clean" if clean else rng.choice(KINDS)
            pid = f"{kind}:m30k-train:{i}+m30k-train:{rng.randrange(10**6)}~tatoeba:{rng.randrange(10**6)}+news:{i * 7}"
            ids.append(pid)
            fh.write(f"{pid}\t{rng.choice(ORIGINS)}\t{kind}\t{int(clean)}\n")
    return ids


def test_lookups_equal_the_rows_read_as_dicts(tmp_path: Path) -> None:
    ids = write_sidecar(tmp_path / "l.tsv", 20_000)
    rows = {r["id"]: r for r in read_label_rows(tmp_path / "l.tsv")}
    labels = PairLabels.read(tmp_path / "l.tsv")
    assert len(labels) == 20_000
    asked = ids[::3] + ["not:an:id", ids[5] + "x"]
    random.Random(1).shuffle(asked)
    pos = labels.positions(asked)
    for pid, p in zip(asked, pos):
        if pid in rows:
            r = rows[pid]
            assert labels.groups[labels.codes[p]] == group_of(r["origin"], r["kind"], r["clean"])
            assert bool(labels.clean[p]) == (r["clean"] == "1")
        else:
            assert p == -1
    expect: dict[str, int] = {}
    for pid in asked:
        g = group_of(**{k: rows[pid][k] for k in ("origin", "kind", "clean")}) if pid in rows else UNLABELLED
        expect[g] = expect.get(g, 0) + 1
    assert labels.count_groups(iter(asked)) == expect
    assert labels.count_groups([]) == {}
    assert len(labels.positions([])) == 0


def test_a_repeated_id_or_a_bad_row_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "l.tsv"
    p.write_text("id\torigin\tkind\tclean\na\tx\tclean\t1\nb\tx\tmisaligned\t0\na\tx\tclean\t1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"l.tsv:4: repeats the id"):
        PairLabels.read(p)
    p.write_text("id\torigin\tkind\tclean\na\tx\tclean\t1\nb\tx\tmisaligned\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"l.tsv:3: has 3 columns"):
        PairLabels.read(p)
    p.write_text("id\torigin\tkind\tclean\na\tx\tclean\tyes\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"l.tsv:2: clean is 'yes'"):
        PairLabels.read(p)
    p.write_text("id\torigin\tkind\tclean\nb\tx\tk\t0\na\tx\tk\t0\nc\tx\tk\t0\na\tx\tk\t0\nb\tx\tk\t0\n",
                 encoding="utf-8")
    with pytest.raises(InputError, match=r"l.tsv:5: repeats the id"):  # the first repeat in file order
        PairLabels.read(p)
    p.write_text("id\torigin\tkind\tclean\n" + "".join(f"i{n}\tx\tkind{n}\t0\n" for n in range(MAX_GROUPS + 1)),
                 encoding="utf-8")
    with pytest.raises(InputError, match=rf"l.tsv:{MAX_GROUPS + 2}: has more than 65,535 groups"):
        PairLabels.read(p)
    with pytest.raises(InputError, match="file not found"):
        PairLabels.read(tmp_path / "missing.tsv")


def test_memory_per_pair_stays_small(tmp_path: Path) -> None:
    """Read into dicts, 200k rows of ~90-character ids take ~600 bytes a pair; held as digests,
    the structure keeps 19 and the peak while reading stays under 80."""
    n = 200_000
    write_sidecar(tmp_path / "l.tsv", n)
    tracemalloc.start()
    labels = PairLabels.read(tmp_path / "l.tsv")
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    held = labels.digests.nbytes + labels.codes.nbytes + labels.clean.nbytes
    assert held == 19 * n
    assert kept < 25 * n, kept / n
    assert peak < 80 * n, peak / n
    assert np.all(labels.digests[1:] > labels.digests[:-1])
