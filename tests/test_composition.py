"""Selection composition by the corpus' pair labels (marginmine.evaluate.composition)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from marginmine.cli.main import main
from marginmine.errors import InputError
from marginmine.evaluate.composition import (
    UNLABELLED,
    Composition,
    count_groups,
    iter_selection_ids,
    read_groups,
    selection_name,
    write_composition,
)

LABELS = ("id\torigin\tkind\tclean\n"
          "m30k-train:1\tmulti30k\tclean\t1\n"
          "tatoeba-deu-eng:5\ttatoeba\tclean\t1\n"
          "tatoeba-deu-eng:6\ttatoeba\tclean\t1\n"
          "misaligned:m30k-train:1~m30k-train:2\tmulti30k\tmisaligned\t0\n"
          "paracrawl:7\tparacrawl\tparacrawl_E\t0\n")


def write_selection(path: Path, ids: list[str]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for i, pid in enumerate(ids):
            fh.write(f"src {i}\ttgt {i}\t{1 - i / 10:.3f}\t{pid}\n")
    return path


def test_groups_are_clean_origin_or_noise_kind(tmp_path: Path) -> None:
    (tmp_path / "labels.tsv").write_text(LABELS, encoding="utf-8")
    groups = read_groups(tmp_path / "labels.tsv")
    assert groups.group("tatoeba-deu-eng:5") == "clean:tatoeba"
    assert groups.group("misaligned:m30k-train:1~m30k-train:2") == "misaligned"
    assert groups.group("new:1") == UNLABELLED
    assert count_groups(["tatoeba-deu-eng:5", "tatoeba-deu-eng:6", "paracrawl:7", "new:1"], groups) == \
        {"clean:tatoeba": 2, "paracrawl_E": 1, UNLABELLED: 1}


def test_labels_without_the_columns_are_named(tmp_path: Path) -> None:
    (tmp_path / "l.tsv").write_text("id\tlabel\nx\t1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"l.tsv: lacks the columns \['clean', 'kind', 'origin'\]"):
        read_groups(tmp_path / "l.tsv")


def test_selection_ids_and_names(tmp_path: Path) -> None:
    sel = write_selection(tmp_path / "ratio.20k.tsv.gz", ["a", "b"])
    assert list(iter_selection_ids(sel)) == ["a", "b"]
    assert selection_name(sel) == ("ratio", "20k")
    with gzip.open(tmp_path / "bad.1k.tsv.gz", "wt") as fh:
        fh.write("s\tt\t0.5\tid1\ns\tt\n")
    with pytest.raises(InputError, match=r"bad.1k.tsv.gz:2: has 2 columns"):
        list(iter_selection_ids(tmp_path / "bad.1k.tsv.gz"))
    with pytest.raises(InputError, match="is not named"):
        selection_name(tmp_path / "selection.tsv")


def test_table_shares_sum_to_one_and_clean_groups_come_first(tmp_path: Path) -> None:
    rows = [Composition("ratio", "4", {"clean:tatoeba": 3, "misaligned": 1}),
            Composition("random", "4", {"clean:multi30k": 1, "misaligned": 2, "boilerplate": 1})]
    write_composition(rows, tmp_path / "c.tsv", tmp_path / "c.md", "demo")
    lines = (tmp_path / "c.tsv").read_text().splitlines()
    assert lines[0] == "method\tN\tgroup\tpairs\tshare"
    by_sel: dict[str, float] = {}
    for ln in lines[1:]:
        method, _, _, _, share = ln.split("\t")
        by_sel[method] = by_sel.get(method, 0) + float(share)
    assert by_sel == pytest.approx({"ratio": 1.0, "random": 1.0})
    md = (tmp_path / "c.md").read_text().splitlines()
    assert md[4] == "| group | random.4 | ratio.4 |"
    assert md[6] == "| **clean, all** | **25.0** | **75.0** |"
    end = next(i for i, ln in enumerate(md) if ln.startswith("| pairs |"))
    groups = [ln.split(" | ")[0].lstrip("| ") for ln in md[7:end]]
    assert groups == ["clean:tatoeba", "clean:multi30k", "misaligned", "boilerplate"]  # by total pairs


def test_cli_on_real_selections_counts_every_pair(tmp_path: Path) -> None:
    (tmp_path / "labels.tsv").write_text(LABELS, encoding="utf-8")
    sel = write_selection(tmp_path / "cosine.3.tsv.gz", ["m30k-train:1", "paracrawl:7", "tatoeba-deu-eng:6"])
    assert main(["composition", "--labels", str(tmp_path / "labels.tsv"), "--selections", str(sel),
                 "--tsv", str(tmp_path / "c.tsv"), "--md", str(tmp_path / "c.md")]) == 0
    assert "| pairs | 3 |" in (tmp_path / "c.md").read_text()


def test_density_recovers_the_neighbourhood_mean_from_the_score_columns(tmp_path: Path) -> None:
    """ratio = cos / nb, so nb = cos / ratio; distance = cos - nb, so nb = cos - distance."""
    from marginmine.evaluate.composition import group_density

    (tmp_path / "labels.tsv").write_text(LABELS, encoding="utf-8")
    groups = read_groups(tmp_path / "labels.tsv")
    ids = ["m30k-train:1", "tatoeba-deu-eng:5", "tatoeba-deu-eng:6", "paracrawl:7"]
    cos = [0.9, 0.8, 0.6, 0.3]
    nb = [0.85, 0.5, 0.4, 0.25]  # captions: a dense neighbourhood
    with gzip.open(tmp_path / "shard.tsv.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(f"s{i}\tt{i}\t{pid}\n" for i, pid in enumerate(ids))
    for kind, margin in (("ratio", [c / n for c, n in zip(cos, nb)]), ("distance", [c - n for c, n in zip(cos, nb)])):
        scores = tmp_path / f"{kind}.scores.tsv"
        scores.write_text(f"cosine\tm-{kind}\n" + "".join(f"{c:.9f}\t{m:.9f}\n" for m, c in zip(margin, cos)))
        got = {d.group: d for d in group_density([tmp_path / "shard.tsv.gz"], [scores], groups, kind, f"m-{kind}",
                                                 "cosine")}
        assert got["clean:multi30k"].mean_neighbourhood == pytest.approx(0.85, abs=1e-6)
        assert got["clean:tatoeba"].mean_neighbourhood == pytest.approx(0.45, abs=1e-6)
        assert got["clean:tatoeba"].pairs == 2 and got["clean:tatoeba"].mean_cosine == pytest.approx(0.7)
    short = tmp_path / "short.scores.tsv"
    short.write_text("ratio\tcosine\n1.0\t0.5\n")
    with pytest.raises(InputError, match="has 1 lines but the shard"):
        group_density([tmp_path / "shard.tsv.gz"], [short], groups, "ratio", "ratio", "cosine")
    with pytest.raises(InputError, match="has no score column 'm-ratio'"):
        group_density([tmp_path / "shard.tsv.gz"], [short], groups, "ratio", "m-ratio", "cosine")
    sel = write_selection(tmp_path / "ratio.2.tsv.gz", ["m30k-train:1", "tatoeba-deu-eng:5"])
    assert main(["composition", "--labels", str(tmp_path / "labels.tsv"), "--selections", str(sel), "--pairs",
                 str(tmp_path / "shard.tsv.gz"), "--scores", str(tmp_path / "ratio.scores.tsv"),
                 "--margin-column", "m-ratio", "--density-tsv",
                 str(tmp_path / "d.tsv"), "--tsv", str(tmp_path / "c.tsv"), "--md", str(tmp_path / "c.md")]) == 0
    assert "| clean:multi30k | 25.0 | 0.900 | 0.850 | 50.0 |" in (tmp_path / "c.md").read_text()
    # planted (clean) pairs at N: precision over the selection, recall over the scored corpus' 3
    assert "| ratio.2 | 2 | 1.000 | 0.667 |" in (tmp_path / "c.md").read_text()
    header = "group\tpairs\tcorpus_share\tmean_cosine\tmean_knn_similarity"
    assert (tmp_path / "d.tsv").read_text().splitlines()[0] == header


def test_without_a_margin_and_cosine_scorer_the_density_table_is_empty_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "labels.tsv").write_text(LABELS, encoding="utf-8")
    sel = write_selection(tmp_path / "ratio.2.tsv.gz", ["m30k-train:1", "tatoeba-deu-eng:5"])
    assert main(["composition", "--labels", str(tmp_path / "labels.tsv"), "--selections", str(sel), "--density-tsv",
                 str(tmp_path / "d.tsv"), "--tsv", str(tmp_path / "c.tsv"), "--md", str(tmp_path / "c.md")]) == 0
    header = "group\tpairs\tcorpus_share\tmean_cosine\tmean_knn_similarity"
    assert (tmp_path / "d.tsv").read_text().splitlines() == [header]
    md = (tmp_path / "c.md").read_text()
    assert "No density table: it needs a ratio or distance scorer and a cosine scorer" in md


def test_density_sums_are_those_of_a_loop_over_the_pairs_bit_for_bit(tmp_path: Path) -> None:
    """Three shards, ids the sidecar lacks, zero margins (an undefined neighbourhood): every count
    and mean equals a plain Python loop over the pairs in corpus order, to the last bit."""
    import random

    from marginmine.evaluate.composition import group_density
    from marginmine.scoring.files import read_scores

    (tmp_path / "labels.tsv").write_text(LABELS, encoding="utf-8")
    groups = read_groups(tmp_path / "labels.tsv")
    known = [line.split("\t")[0] for line in LABELS.splitlines()[1:]]
    rng = random.Random(3)
    shards, scores = [], []
    for s in range(3):
        ids = [rng.choice(known + ["unknown:1", "unknown:2"]) for _ in range(700 + 50 * s)]
        shard, sc = tmp_path / f"shard{s}.tsv.gz", tmp_path / f"shard{s}.scores.tsv"
        with gzip.open(shard, "wt", encoding="utf-8") as fh:
            fh.writelines(f"s\tt\t{pid}\n" for pid in ids)
        sc.write_text("ratio\tcosine\n" + "".join(
            f"{0.0 if rng.random() < 0.05 else rng.uniform(0.5, 1.5):.7f}\t{rng.uniform(-0.2, 1):.7f}\n" for _ in ids))
        shards.append(shard)
        scores.append(sc)
    sums: dict[str, list[float]] = {}
    for shard, sc in zip(shards, scores):  # the loop group_density replaced
        ids = list(iter_selection_ids(shard, 2))
        m, c = read_scores(sc, "ratio"), read_scores(sc, "cosine")
        with np.errstate(divide="ignore", invalid="ignore"):
            nb = np.where(m != 0, c / m, np.nan)
        for i, pid in enumerate(ids):
            acc = sums.setdefault(groups.group(pid), [0, 0.0, 0.0, 0])
            acc[0] += 1
            acc[1] += float(c[i])
            if not np.isnan(nb[i]):
                acc[2] += float(nb[i])
                acc[3] += 1
    got = group_density(shards, scores, groups, "ratio", "ratio", "cosine")
    assert [d.group for d in got] == sorted(sums) and UNLABELLED in sums
    for d in got:
        n, cos_sum, nb_sum, nb_n = sums[d.group]
        assert (d.pairs, d.mean_cosine, d.mean_neighbourhood) == (n, cos_sum / n, nb_sum / nb_n)


def test_a_header_only_sidecar_or_one_with_an_unlabelled_group_counts_unknown_ids_once(tmp_path: Path) -> None:
    (tmp_path / "empty.tsv").write_text("id\torigin\tkind\tclean\n", encoding="utf-8")
    empty = read_groups(tmp_path / "empty.tsv")
    assert count_groups(["a", "b"], empty) == {UNLABELLED: 2} and empty.group("a") == UNLABELLED
    (tmp_path / "u.tsv").write_text(LABELS + f"x:1\tweb\t{UNLABELLED}\t0\n", encoding="utf-8")
    labels = read_groups(tmp_path / "u.tsv")
    assert count_groups(["x:1", "new:1", "paracrawl:7"], labels) == {UNLABELLED: 2, "paracrawl_E": 1}
    assert labels.group_names().count(UNLABELLED) == 1
