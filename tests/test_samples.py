"""Samples to read (issue 33, part 3): removed pairs per preprocessing step, pairs at score
quantiles and the top-N boundary, pairs two scorers disagree on, escaped for HTML and TSV."""

from __future__ import annotations

import gzip
import random
import tracemalloc
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from marginmine.cli.main import main
from marginmine.io.markup import tsv_field, visible_html
from marginmine.io.text import ReadStats, clean_field
from marginmine.preprocess import removed as rm
from marginmine.preprocess.ledger import Ledger
from marginmine.preprocess.normalize import clean_text
from marginmine.preprocess.pipeline import InputSpec, PreprocessSettings, preprocess
from marginmine.preprocess.shard import split_corpus
from marginmine.report.samples import draw_disagreement, draw_scorer
from marginmine.scoring.selection import Source, select

NASTY = ("<script>alert(1)</script> a\u200fb\u202ec \u2028d\x07e\x1bf\x85g\u2029h\\t", "x\ty\rz\n&amp;")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:  # noqa: ANN001
        self.tags.append(tag)


def _tsv_unescape(field: str) -> str:
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\":
            nxt = field[i + 1]
            if nxt == "u":
                out.append(chr(int(field[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append({"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}[nxt])
            i += 2
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


# --- a small real corpus with scores that tie -------------------------------------------------


def _corpus(paracrawl_tsv: Path, tmp_path: Path, n: int = 600, shards: int = 3) -> tuple[list[Path], list[Path]]:
    """``n`` real ParaCrawl pairs (with their line as id) in ``shards`` kept files, and score files of
    two scorers, rounded to one decimal so many scores tie."""
    lines = paracrawl_tsv.read_text(encoding="utf-8").splitlines()[:n]
    pairs, scores = [], []
    per = -(-n // shards)
    for s in range(shards):
        chunk = lines[s * per:(s + 1) * per]
        p, f = tmp_path / f"kept{s}.tsv.gz", tmp_path / f"scores{s}.tsv"
        with gzip.open(p, "wt", encoding="utf-8") as out:
            for k, line in enumerate(chunk):
                cols = line.split("\t")
                out.write(f"{cols[2]}\t{cols[3]}\tid{s * per + k}\n")
        rows = ["a\tb"]
        for line in chunk:
            cols = line.split("\t")
            a = round(min(len(cols[2]), len(cols[3])) / max(len(cols[2]), len(cols[3]), 1), 1)
            rows.append(f"{a:.6f}\t{round((len(cols[2]) % 7) / 7, 1):.6f}")
        f.write_text("\n".join(rows) + "\n")
        pairs.append(p)
        scores.append(f)
    return pairs, scores


def _selected_ids(pairs: list[Path], scores: list[Path], method: str, n: int, tmp_path: Path) -> set[str]:
    out = tmp_path / f"sel.{method}.{n}.tsv"
    select([Source(p, s) for p, s in zip(pairs, scores)], out, method, n=n)
    return {line.rstrip("\n").split("\t")[3] for line in open(out, encoding="utf-8")}


def _all_scores(scores: list[Path], name: str) -> np.ndarray:
    from marginmine.scoring.files import read_scores

    return np.concatenate([read_scores(f, name) for f in scores])


def test_boundary_quantiles_and_disagreements_match_the_selection(paracrawl_tsv: Path, tmp_path: Path) -> None:
    pairs, scores = _corpus(paracrawl_tsv, tmp_path)
    a, b = _all_scores(scores, "a"), _all_scores(scores, "b")
    n_keep = 150
    assert (a == np.sort(a)[::-1][n_keep - 1]).sum() > 20  # the boundary falls inside a long tie
    sel_a, sel_b = (_selected_ids(pairs, scores, m, n_keep, tmp_path) for m in ("a", "b"))
    drawn = draw_scorer("a", a, [("150", n_keep)], per_boundary=8)
    boundary = [d for d in drawn if d.section == "boundary"]
    assert [d.rank for d in boundary] == list(range(n_keep - 7, n_keep + 9))
    assert sum(d.kept for d in boundary) == 8
    for d in drawn:  # quantile rows: kept at the first N as well
        assert d.kept == (f"id{d.index}" in sel_a), d
    # the last kept and the first dropped tie: corpus order decides, as in the selection
    assert boundary[7].score == boundary[8].score and boundary[7].index < boundary[8].index
    for d in drawn:
        if d.section == "quantile" and d.rank % 3 == 2:  # the centre of each quantile's three
            q = float(d.label.rstrip("%")) / 100
            assert (a < d.score).mean() <= q + 1 / len(a) and (a <= d.score).mean() >= q - 1 / len(a), d
    dis = draw_disagreement("a", a, "b", b, [("150", n_keep)], seed=7, per=10)
    assert {d.scorer for d in dis} == {"a", "b"} and len(dis) == 20
    for d in dis:
        keeps, drops = (sel_a, sel_b) if d.scorer == "a" else (sel_b, sel_a)
        assert f"id{d.index}" in keeps and f"id{d.index}" not in drops
        assert d.rank <= n_keep < d.other_rank
    assert dis == draw_disagreement("a", a, "b", b, [("150", n_keep)], seed=7, per=10)


def test_report_samples_escapes_markup_bidi_and_controls(paracrawl_tsv: Path, tmp_path: Path) -> None:
    pairs, scores = _corpus(paracrawl_tsv, tmp_path)
    with gzip.open(pairs[0], "rt", encoding="utf-8") as fh:  # the first shard's pairs hold web text
        n_lines = len(fh.read().splitlines())
    tgt = NASTY[1].replace("\t", " ").replace("\n", " ")
    with gzip.open(pairs[0], "wt", encoding="utf-8") as fh:
        fh.write("".join(f"{NASTY[0]}\t{tgt}\tid{k}\n" for k in range(n_lines)))
    out = tmp_path / "out"
    args = ["-q", "report-samples", "--pairs", *map(str, pairs), "--scores", "a=" + ",".join(map(str, scores)),
            "b=" + ",".join(map(str, scores)), "--sizes", "150", "--html", str(out / "samples.html"),
            "--scores-tsv", str(out / "scores.tsv"), "--disagree-tsv", str(out / "disagree.tsv"),
            "--removed-tsv", str(out / "removed.tsv"), "--title", "t <b>"]
    assert main(args) == 0
    page = (out / "samples.html").read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags and "b" not in parser.tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "t &lt;b&gt;" in page
    for ch in "\u200f\u202e\u2028\u2029\x07\x1b\x85":
        assert ch not in page, repr(ch)
        assert f"[U+{ord(ch):04X}]" in page, repr(ch)
    tsv = (out / "scores.tsv").read_text(encoding="utf-8")
    body = tsv.splitlines()  # str.splitlines breaks at U+2028, U+0085, ... too
    assert len(body) == tsv.count("\n") and all(len(r.split("\t")) == 14 for r in body)
    rows = [r.split("\t") for r in body[1:]]
    assert [_tsv_unescape(r[12]) for r in rows if r[9] == "0"][:1] == [tgt]
    assert {_tsv_unescape(r[11]) for r in rows if r[9] == "0"} == {NASTY[0]}


def test_escaping_functions_alone() -> None:
    assert visible_html("<i>") == "&lt;i&gt;"
    assert visible_html("a\u202eb") == 'a<span class="cc" title="RIGHT-TO-LEFT OVERRIDE">[U+202E]</span>b'
    # joiners stay
    assert visible_html("\u0645\u0631\u062d\u0628\u0627 \u200d") == "\u0645\u0631\u062d\u0628\u0627 \u200d"
    for text in NASTY:
        field = tsv_field(text)
        assert len(field.splitlines()) == 1 and "\t" not in field and _tsv_unescape(field) == text


# --- removed pairs ------------------------------------------------------------------------------


def _rejects(path: Path, lines: list[str]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("".join(lines))


def _reject_lines(n: int) -> list[str]:
    steps = ("langid", "length", "ratio")
    return [f"{i}\t{steps[i % 3] if i % 50 else 'overlap'}\treason{i % 2}\tsrc {i}\ttgt {i}\tid{i}\n"
            for i in range(1, n + 1)]


def test_removed_sample_is_seeded_order_free_mergeable_and_bounded(tmp_path: Path) -> None:
    lines = _reject_lines(3000)
    _rejects(tmp_path / "a.tsv.gz", lines)
    shuffled = lines[:]
    random.Random(1).shuffle(shuffled)
    _rejects(tmp_path / "b.tsv.gz", shuffled)
    one = rm.sample_rejects(tmp_path / "a.tsv.gz", 0, seed=5, per_step=20)
    assert [sum(r.step == s for r in one) for s in ("langid", "length", "overlap", "ratio")] == [20, 20, 20, 20]
    assert one == rm.sample_rejects(tmp_path / "b.tsv.gz", 0, seed=5, per_step=20)  # file order does not matter
    assert one != rm.sample_rejects(tmp_path / "a.tsv.gz", 0, seed=6, per_step=20)
    assert one != rm.sample_rejects(tmp_path / "a.tsv.gz", 1, seed=5, per_step=20)
    # halves sampled apart and merged give the sample of the whole
    _rejects(tmp_path / "h1.tsv.gz", lines[:1700])
    _rejects(tmp_path / "h2.tsv.gz", lines[1700:])
    halves = rm.sample_rejects(tmp_path / "h1.tsv.gz", 0, 5) + rm.sample_rejects(tmp_path / "h2.tsv.gz", 0, 5)
    assert rm.bottom_k(halves, 20) == one
    # a uniform sample: about as many early as late lines
    langid = [r.line for r in rm.bottom_k((r for r in rm.iter_rejects(tmp_path / "a.tsv.gz", 0, 5)), 400)
              if r.step == "langid"]
    assert 120 < sum(x <= 1500 for x in langid) < 280
    # memory: the kept rows only, however many rejects stream past
    rows = (rm.Removed(rm.priority(5, 0, i), 0, i, "s", "r", "x" * 200, "y" * 200) for i in range(60_000))
    tracemalloc.start()
    sample = rm.bottom_k(rows, 20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(sample) == 20 and peak < 200_000, peak


def test_removed_sample_is_the_same_after_an_interrupted_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _rejects(tmp_path / "r.tsv.gz", _reject_lines(2000))
    args = ["-q", "removed-sample", "--rejects", str(tmp_path / "r.tsv.gz"), "--shard", "2", "--seed", "9"]
    assert main([*args, "--output", str(tmp_path / "whole.tsv")]) == 0
    real = rm.iter_sentences

    def cut(path, *a, **kw):  # noqa: ANN001, ANN202
        for n, text in enumerate(real(path, *a, **kw)):
            if n == 1200:
                raise KeyboardInterrupt
            yield text

    monkeypatch.setattr(rm, "iter_sentences", cut)
    assert main([*args, "--output", str(tmp_path / "again.tsv")]) == 130
    assert not list(tmp_path.glob("again*"))  # nothing half-written
    monkeypatch.setattr(rm, "iter_sentences", real)
    assert main([*args, "--output", str(tmp_path / "again.tsv")]) == 0
    assert (tmp_path / "again.tsv").read_bytes() == (tmp_path / "whole.tsv").read_bytes()


def test_real_corpus_every_step_that_removed_pairs_is_sampled_with_its_raw_line(paracrawl_tsv: Path,
                                                                                  tmp_path: Path) -> None:
    shards = [tmp_path / f"s{i}.tsv.gz" for i in range(3)]
    first = split_corpus(InputSpec((str(paracrawl_tsv),), (2, 3)), shards, tmp_path / "split_rej.tsv.gz",
                         tmp_path / "split.json", block=100)
    later = Ledger()
    samples = []
    for i, s in enumerate(shards):
        later.merge(preprocess(InputSpec((str(s),)), tmp_path / f"k{i}.tsv", tmp_path / f"r{i}.tsv",
                               tmp_path / f"l{i}.json", PreprocessSettings("en", "de"), dedup=False))
        rm.write_sample(rm.sample_rejects(tmp_path / f"r{i}.tsv", i, 1234, 5), tmp_path / f"sample{i}.tsv")
        samples.append(tmp_path / f"sample{i}.tsv")
    ledger = first.then(later)
    merged = rm.merged_sample(tmp_path / "split_rej.tsv.gz", samples, 1234, len(shards), 100, per_step=5)
    by_step: Counter[str] = Counter()
    for (step, _, _), n in ledger.removed.items():
        by_step[step] += n
    removing = {step for step, n in by_step.items() if n}
    assert len(removing) >= 4, removing
    assert removing == {r.step for r in merged}
    for step in removing:
        assert sum(r.step == step for r in merged) == min(5, by_step[step])
    raw = paracrawl_tsv.read_text(encoding="utf-8").split("\n")
    for r in merged:  # the raw line holds the pair (as the reader cleans it)
        cols = raw[r.raw_line - 1].split("\t")
        src, tgt = (clean_field(c, ReadStats())[0] for c in cols[2:4])
        assert (clean_text(src), clean_text(tgt)) == (r.src, r.tgt), r


def test_raw_lines_and_kept_index_by_hand() -> None:
    from marginmine.preprocess.shard import shard_of

    # raw lines 1..12, split rejected 1, 2, 5, 8: the kept pairs are lines 3, 4, 6, 7, 9, 10, 11, 12
    assert rm.raw_lines([5, 0, 2, 1, 3, 4, 7], iter([1, 2, 5, 8])) == {0: 3, 1: 4, 2: 6, 3: 7, 4: 9, 5: 10, 7: 12}
    assert rm.raw_lines([0, 1], iter([])) == {0: 1, 1: 2}
    seen: dict[int, list[int]] = {}
    for i in range(57):  # 3 shards of blocks of 4: shard s's k-th line is kept pair kept_index(s, k)
        seen.setdefault(shard_of(i, 3, 4), []).append(i)
    for s, idx in seen.items():
        assert [rm.kept_index(s, k, 3, 4) for k in range(1, len(idx) + 1)] == idx
