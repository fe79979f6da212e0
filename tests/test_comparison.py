"""The selection-method comparison over seeds (``marginmine compare``/``headline``): tables from the
evaluate reports and the hypothesis files they name, refusals of bad inputs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import sacrebleu

from conftest import data_dir
from marginmine.cli.main import main
from marginmine.errors import InputError
from marginmine.nmt.comparison import headline_text, read_run
from marginmine.nmt.significance import SEED_TABLE_HEADER

REFS = [x for x in (data_dir() / "wmt-newstest-ende/newstest2013.de").read_text(encoding="utf-8").splitlines()
        if x.strip()][:300]


def damaged(refs: list[str], drop: float, seed: int) -> list[str]:
    """Each reference with a share ``drop`` of its words removed (a worse system drops more)."""
    rng = random.Random(seed)
    return [" ".join(w for w in r.split() if rng.random() >= drop) for r in refs]


def fake_run(root: Path, method: str, n: str, seed: int, drop: float, *, extra: bool = True,
             meta_seed: int | None = None, machines: tuple[str, str] | None = None) -> Path:
    d = root / "nmt" / f"{method}.{n}" / f"seed{seed}"
    hyp_dir = d / "bleu.hyp"
    hyp_dir.mkdir(parents=True)
    ref = root / "ref.de"
    ref.write_text("\n".join(REFS) + "\n", encoding="utf-8")
    sets = {}
    for name, refs in (("test", REFS), ("dev", REFS[:50]), *((("news", REFS[:100]),) if extra else ())):
        r = root / f"{name}.ref.de"
        r.write_text("\n".join(refs) + "\n", encoding="utf-8")
        hyps = damaged(refs, drop, seed)
        h = hyp_dir / f"{name}.de"
        h.write_text("\n".join(hyps) + "\n", encoding="utf-8")
        sets[name] = {"bleu": sacrebleu.corpus_bleu(hyps, [refs]).score, "tok_bleu": 0.0, "hyp_file": str(h),
                      "ref_file": str(r), "lines": len(refs)}
    obj = {"bleu": sets["test"]["bleu"], "test": sets["test"], "dev": sets["dev"],
           "extra": {k: v for k, v in sets.items() if k not in ("test", "dev")},
           "meta": {"train_pairs": 20000, "seed": seed if meta_seed is None else meta_seed, "num_updates": 1000,
                    "train_seconds_total": 900.0, "dev_loss": 5.5,
                    **({"train_machine": machines[0], "machine": machines[1]} if machines else {})}}
    (d / "bleu.json").write_text(json.dumps(obj))
    return d / "bleu.json"


def labels(root: Path) -> Path:
    p = root / "test.labels.tsv"
    rows = [f"id{i}\t{'tatoeba' if i % 3 else 'multi30k'}\tclean\t1" for i in range(len(REFS))]
    p.write_text("id\torigin\tkind\tclean\n" + "\n".join(rows) + "\n")
    return p


def compare(tmp_path: Path, files: list[Path], *extra: str) -> int:
    out = tmp_path / "cmp"
    return main(["compare", "--inputs", *map(str, files), "--headline", "ratio", "--tsv", f"{out}.tsv", "--md",
                 f"{out}.md", "--runs", f"{out}_runs.tsv", "--png", f"{out}.png", "--resamples", "200", *extra])


def table(tmp_path: Path) -> list[dict[str, str]]:
    lines = (tmp_path / "cmp.tsv").read_text().splitlines()
    assert lines[0].split("\t") == list(SEED_TABLE_HEADER)
    return [dict(zip(SEED_TABLE_HEADER, x.split("\t"))) for x in lines[1:]]


def test_compare_reports_mean_sd_over_seeds_and_tests_against_the_headline(tmp_path: Path) -> None:
    files = [fake_run(tmp_path, "ratio", "20k", 1, 0.10), fake_run(tmp_path, "ratio", "20k", 2, 0.12),
             fake_run(tmp_path, "random", "20k", 1, 0.60), fake_run(tmp_path, "cosine", "20k", 1, 0.11),
             fake_run(tmp_path, "cosine", "20k", 2, 0.13)]
    assert compare(tmp_path, files, "--subsets", f"test={labels(tmp_path)}") == 0
    rows = table(tmp_path)
    assert [r["test_set"] for r in rows][:3] == ["test"] * 3  # the headline test first
    assert {r["test_set"] for r in rows} == {"test", "test/multi30k", "test/tatoeba", "news"}  # dev is not a test
    by = {(r["test_set"], r["method"]): r for r in rows}
    runs = {(p.parent.parent.name, p.parent.name): json.loads(p.read_text()) for p in files}
    ratio = [runs[("ratio.20k", f"seed{s}")]["test"]["bleu"] for s in (1, 2)]
    head = by[("test", "ratio")]
    assert head["n_seeds"] == "2" and head["seeds"] == "1,2" and head["versus"] == ""
    assert head["bleu_mean"] == f"{sum(ratio) / 2:.2f}"
    assert head["bleu_sd"] == f"{abs(ratio[0] - ratio[1]) / 2 ** 0.5:.2f}"
    rnd = by[("test", "random")]  # drops 60% of the words: far worse, and significantly so
    assert rnd["versus"] == "ratio" and float(rnd["diff"]) < -20 and float(rnd["p_value"]) < 0.01
    assert rnd["note"].startswith("random has one seed")  # the methods named in the TSV as in the Markdown
    cos = by[("test", "cosine")]
    assert cos["n_seeds"] == "2" and float(cos["ci_low"]) < float(cos["diff"]) < float(cos["ci_high"])
    md = (tmp_path / "cmp.md").read_text()
    assert "## test/tatoeba" in md and f"**{head['bleu_mean']} ± {head['bleu_sd']}**" in md
    runs_tsv = (tmp_path / "cmp_runs.tsv").read_text().splitlines()
    assert runs_tsv[0].split("\t")[:7] == ["method", "N", "seed", "pairs", "updates", "train_s", "dev_loss"]
    assert len(runs_tsv) == 6 and (tmp_path / "cmp.png").read_bytes()[:4] == b"\x89PNG"
    header = runs_tsv[0].split("\t")
    assert header.index("test_chrf") > header.index("test_bleu") and header[-2:] == ["train_machine", "decode_machine"]
    assert "Machine: not recorded (reports written before marginmine.machine)." in md


def test_the_tables_name_the_machine_each_system_ran_on(tmp_path: Path) -> None:
    """BLEU differs between CPU models: a comparison joining two machines' runs says which ran where."""
    epyc, xeon = "AMD EPYC, 2 cores, avx2", "Intel(R) Xeon(R) Platinum, 2 cores, avx512f"
    files = [fake_run(tmp_path, "ratio", "20k", 1, 0.10, machines=(epyc, epyc)),
             fake_run(tmp_path, "ratio", "20k", 2, 0.12, machines=(epyc, epyc)),
             fake_run(tmp_path, "cosine", "20k", 1, 0.11, machines=(xeon, xeon)),
             fake_run(tmp_path, "cosine", "20k", 2, 0.13, machines=(epyc, xeon))]
    assert compare(tmp_path, files) == 0
    md = (tmp_path / "cmp.md").read_text()
    assert (f"Machines (BLEU differs between CPU models): cosine.20k seed 1 trained and decoded on {xeon}; "
            f"cosine.20k seed 2 trained on {epyc}, decoded on {xeon}; ratio.20k seed 1, ratio.20k seed 2 "
            f"trained and decoded on {epyc}.") in md
    rows = [dict(zip(*(x.split("\t") for x in ((tmp_path / "cmp_runs.tsv").read_text().splitlines()[0], line))))
            for line in (tmp_path / "cmp_runs.tsv").read_text().splitlines()[1:]]
    assert [(r["method"], r["seed"], r["train_machine"], r["decode_machine"]) for r in rows] == [
        ("cosine", "1", xeon, xeon), ("cosine", "2", epyc, xeon), ("ratio", "1", epyc, epyc),
        ("ratio", "2", epyc, epyc)]
    files = [fake_run(tmp_path / "one", m, "20k", s, 0.1, machines=(epyc, epyc))
             for m in ("ratio", "cosine") for s in (1, 2)]
    assert compare(tmp_path / "one", files) == 0
    assert f"Machine: every system trained and decoded on {epyc}." in (tmp_path / "one" / "cmp.md").read_text()


def test_a_missing_or_short_hypothesis_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [fake_run(tmp_path, "ratio", "20k", 1, 0.1), fake_run(tmp_path, "random", "20k", 1, 0.5)]
    hyp = tmp_path / "nmt/random.20k/seed1/bleu.hyp/test.de"
    hyp.write_text("\n".join(hyp.read_text().splitlines()[:-3]) + "\n")
    assert compare(tmp_path, files) == 2
    err = capsys.readouterr().err
    assert str(hyp) in err and "297" in err and "300" in err
    hyp.unlink()
    assert compare(tmp_path, files) == 2
    assert str(hyp) in capsys.readouterr().err
    assert not (tmp_path / "cmp.tsv").exists()


def test_reports_outside_a_seed_directory_or_with_another_seed_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "ratio.20k" / "bleu.json"
    bad.parent.mkdir()
    bad.write_text("{}")
    with pytest.raises(InputError, match="seed<S>"):
        read_run(bad)
    with pytest.raises(InputError, match="trained with seed 7"):
        read_run(fake_run(tmp_path, "ratio", "20k", 1, 0.1, meta_seed=7))


def test_seeds_of_one_system_must_decode_the_same_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [fake_run(tmp_path, "ratio", "20k", 1, 0.1), fake_run(tmp_path, "ratio", "20k", 2, 0.1, extra=False)]
    assert compare(tmp_path, files) == 2
    assert "every seed of a system must decode the same sets" in capsys.readouterr().err


def test_headline_is_the_mean_over_seeds_first(tmp_path: Path) -> None:
    files = [fake_run(tmp_path, "ratio", "20k", 1, 0.1), fake_run(tmp_path, "ratio", "20k", 2, 0.2)]
    out = tmp_path / "bleu_20k.txt"
    assert main(["headline", "--inputs", *map(str, files), "--output", str(out)]) == 0
    text = out.read_text().splitlines()
    vals = [read_run(f).sets["test"].bleu for f in files]
    assert text[0] == f"{sum(vals) / 2:.2f}" and "mean over 2 training seed(s)" in text[2]
    assert headline_text([read_run(f) for f in files]) == out.read_text()
    cosine = fake_run(tmp_path, "cosine", "20k", 1, 0.1)
    with pytest.raises(Exception, match="one method at one N"):
        headline_text([read_run(f) for f in [*files, cosine]])
