"""``marginmine docs-results`` (``make docs-results``): docs/results.md rendered from the tables the
pipeline wrote - each section the file's own Markdown under a stamp (file, date, machine, commit) -
and the marked blocks of the README and other pages filled, every byte outside them kept.

The fake results directory is written by the pipeline's own writers (comparison, intrinsic, BUCC,
quality, composition, ledger, wall times, summary, votes), so a change of their format shows here;
``test_smoke_results_render`` renders the smoke run's real tables.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from marginmine.cli.main import main
from marginmine.errors import InputError
from marginmine.report.blocks import commit_stamp, marker, replace_blocks
from marginmine.report.docsresults import DEMO, DEMO_EXTRA, PUBLISHED, render
from test_comparison import fake_run

EPYC, XEON = "AMD EPYC, 2 cores, avx2", "Intel Xeon, 4 cores, avx512f"
#: the make invocation's row of wall_times.tsv: the tables' files are dated inside it
START, END = datetime(2030, 1, 2, 10, 0, tzinfo=timezone.utc), datetime(2030, 1, 2, 11, 0, tzinfo=timezone.utc)
STAMP = re.compile(r"^Rendered from `(?P<path>[^`]+)` \(written (?P<date>\d{4}-\d\d-\d\d \d\d:\d\d) UTC\) · "
                   r"(?P<machine>machines?: .+) · commit (?P<commit>.+)$", re.M)


def _date(paths: list[Path], when: datetime) -> None:
    for p in paths:
        os.utime(p, (when.timestamp(), when.timestamp()))


def write_wall_times(path: Path, rows: list[tuple[str, datetime, datetime, str]]) -> None:
    """scripts/wall_time.sh's rows (part, started, ended, seconds, exit, machine) and its summary."""
    from marginmine.report.wall_times import COLUMNS, write_summary

    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(COLUMNS)] + [f"{part}\t{a:%Y-%m-%dT%H:%M:%SZ}\t{b:%Y-%m-%dT%H:%M:%SZ}\t"
                                    f"{int((b - a).total_seconds())}\t0\t{m}" for part, a, b, m in rows]
    path.write_text("\n".join(lines) + "\n")
    write_summary(path, path.with_suffix(".md"))


def write_comparison(root: Path, out: Path, methods: dict[str, float], machines: tuple[str, str]) -> None:
    from marginmine.nmt.comparison import compare_runs, read_run
    from marginmine.nmt.comparison import write_comparison as write
    from marginmine.nmt.significance import SignificanceSettings

    settings = SignificanceSettings(resamples=100)
    runs = [read_run(fake_run(root, m, "20k", s, drop + 0.01 * s, extra=False, machines=machines))
            for m, drop in methods.items() for s in (1, 2)]
    rows = compare_runs(runs, "ratio", None, settings)
    write(rows, runs, "ratio", out / "comparison.tsv", out / "comparison.md", out / "comparison_runs.tsv",
          title="demo: en-de", settings=settings)


def write_tables(out: Path, intrinsic_name: str = "intrinsic.md") -> None:
    """The intrinsic, BUCC-style, quality and composition tables by their writers."""
    from marginmine.encoders.intrinsic import write_report
    from marginmine.evaluate.bucc import MiningResult, write_table
    from marginmine.evaluate.composition import Composition, write_composition
    from marginmine.evaluate.filtereval import write_quality_table

    ev = out / "eval" / "dan.json"
    ev.parent.mkdir(parents=True, exist_ok=True)
    ev.write_text(json.dumps({"encoder": "dan", "info": {"minutes": 8.0}, "rows": [
        {"set": s, "margin": m, "pairs": 1000, "err_src2tgt": e, "err_tgt2src": e + 1, "err_avg": e + 0.5}
        for s in ("tatoeba-deu-eng", "newstest2012") for m, e in (("cosine", 7.0), ("ratio", 5.0))]}))
    write_report([ev], out / intrinsic_name.replace(".md", ".tsv"), out / intrinsic_name)
    write_table([MiningResult("ratio", "dan", "ratio", "max", 1.05, 0.6, 0.7, 0.5, 0.58, 900)],
                out / "bucc.tsv", out / "bucc.md", "BUCC-style mining (demo)", cannot_mine=["random"])
    write_quality_table([{"data": "paracrawl-v3", "scorer": "ratio", "pairs": 2000, "positives": 400, "auc": 0.62,
                          "p@100": 0.4}], out / "quality.tsv", out / "quality.md", "Filtering quality (demo)")
    write_composition([Composition("ratio", "20k", {"clean:tatoeba": 12, "mt": 3}),
                       Composition("random", "20k", {"clean:tatoeba": 5, "mt": 10})],
                      out / "composition.tsv", out / "composition.md", "demo", density_tsv=out / "density.tsv")
    import numpy as np

    from marginmine.evaluate.cleanreport import baseline_by_group, estimate, labelled_check, summary_md
    from marginmine.evaluate.cleanshare import ScoreCounts

    rng = np.random.default_rng(1)
    scores, noise = np.r_[rng.normal(1.2, 0.1, 300), rng.normal(0.5, 0.2, 700)], rng.normal(0.5, 0.2, 1000)
    truth = np.arange(1000) < 300
    (out / "clean_share.md").write_text(summary_md([estimate("ratio", ScoreCounts.of(scores), ScoreCounts.of(noise),
                                                             {"200": 200})], "demo: estimated clean share"))
    write_quality_table(labelled_check("demo corpus", {"ratio": scores}, {"ratio": noise}, truth, [200]),
                        out / "clean_share_check.tsv", out / "clean_share_check.md", "Estimated vs labelled")
    write_quality_table(baseline_by_group("demo corpus", {"ratio": scores}, {"ratio": noise}, truth.astype(int),
                                          ["noise", "clean"], [200]),
                        out / "baseline_groups.tsv", out / "baseline_groups.md", "Groups against the baseline")
    from marginmine.evaluate.audit import BAD, GOOD, Audit, allocate, draw_ranks, plan_strata
    from marginmine.evaluate.audit_report import estimate as audit_estimate
    from marginmine.evaluate.audit_report import write_estimate

    edges = plan_strata(1000, 4, [200])
    drawn = draw_ranks(edges, allocate(edges, 60), 1)
    audit = Audit(1000, edges, drawn, np.where(truth[np.argsort(-scores, kind="stable")][drawn], GOOD, BAD))
    write_estimate(audit_estimate(audit, "ratio", [200], {}, 0.9, 1, 500), audit, out / "estimate.tsv",
                   out / "estimate.md", out / "estimate.png", out / "estimate.json", draws=500)


def build_demo(root: Path) -> Path:
    """results/demo below ``root`` as make demo leaves it (every file dated inside its wall-time row)."""
    from marginmine.preprocess.ledger import Ledger, length_bucket

    res = root / "results" / "demo"
    res.mkdir(parents=True)
    write_comparison(root / "runs", res, {"ratio": 0.10, "cosine": 0.12, "random": 0.5}, (EPYC, EPYC))
    write_tables(res)
    for sub, names in (("encoders", ("intrinsic.md", "intrinsic.tsv")), ("mining", ("bucc.md", "bucc.tsv")),
                       ("filtering", ("quality.md", "quality.tsv", "clean_share_check.md", "clean_share_check.tsv",
                                      "baseline_groups.md", "baseline_groups.tsv")),
                       ("select", ("composition.md", "composition.tsv", "density.tsv", "clean_share.md")),
                       ("audit", ("estimate.md",))):
        (res / sub).mkdir(exist_ok=True)
        for n in names:
            (res / n).rename(res / sub / n)
    ledger = Ledger()
    ledger.declare(["read", "dedup", "length"])
    for i in range(20):
        src = "word " * (3 + i)
        if i % 5 == 0:
            ledger.add_removed("dedup", "duplicate", length_bucket(src))
        elif i % 7 == 0:
            ledger.add_removed("length", "too_short", length_bucket(src))
        else:
            ledger.add_kept(length_bucket(src))
    (res / "preprocess").mkdir()
    ledger.write(res / "preprocess" / "ledger.json")
    write_wall_times(res / "wall_times.tsv", [("demo", START, END, XEON)])
    _date([p for p in res.rglob("*") if p.is_file() and not p.name.startswith("wall_times")], START.replace(minute=30))
    return res


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo(tmp_path_factory.mktemp("built"))


@pytest.fixture
def demo(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the built results/demo (with the files' dates) below the test's working directory."""
    shutil.copytree(built, tmp_path / "results" / "demo")  # copy2: the dates come along
    monkeypatch.chdir(tmp_path)
    return tmp_path / "results" / "demo"


def run(*argv: str) -> int:
    return main(["--quiet", "docs-results", *argv])


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_every_demo_table_is_a_section_with_its_source_and_stamp(demo: Path, capsys) -> None:  # noqa: ANN001
    assert run("--results", "results/demo", "--output", "docs/results.md") == 0
    page = Path("docs/results.md").read_text()
    assert page.startswith("<!-- Generated by `make docs-results`")
    stamps = {m["path"]: m for m in STAMP.finditer(page)}
    assert set(stamps) == {f"results/demo/{t.path}" for t in DEMO}
    for t in DEMO:
        s = stamps[f"results/demo/{t.path}"]
        assert s["date"] == "2030-01-02 10:30" or t.key == "wall-times", (t.key, s["date"])
        assert s["commit"].startswith("not recorded")  # tmp_path is no git repository
    # BLEU's machine: where the systems ran (comparison_runs.tsv); the others: the make invocation's
    assert stamps["results/demo/comparison.md"]["machine"].startswith(f"machine: {EPYC} (where its NMT systems")
    assert stamps["results/demo/mining/bucc.md"]["machine"].startswith(f"machine: {XEON} (the make invocation that")
    # each file's Markdown under its own title, its notes kept, its headings below the section's
    for heading in ("### BLEU and chrF by selection method: demo: en-de", "### Preprocessing ledger",
                    "### Encoder intrinsic evaluation", "### BUCC-style mining (demo)", "### Filtering quality (demo)",
                    "### What each selection is made of: demo", "### Wall time per part: `"):
        assert f"\n{heading}" in page, heading
    assert "\n#### test\n" in page and "\n## test\n" not in page
    assert f"Machine: every system trained and decoded on {EPYC}." in page  # the comparison's own machines line
    assert "Not mining scores (no margin function to retrieve with): random." in page
    assert "#### By step and reason" in page and "| dedup |  |" in page
    # the suite not run: one line saying which commands produce it
    note = [line for line in page.splitlines() if "make published" in line and "does not exist" in line]
    assert note == ["`results/demo/published` does not exist: `make published` writes the suite's tables, then "
                    "`make docs-results` renders them here."]


def test_a_table_dated_outside_every_run_names_the_runs_machines(demo: Path) -> None:
    write_wall_times(demo / "wall_times.tsv", [("demo", START, END, XEON), ("demo", END, END, EPYC)])
    _date([demo / "filtering" / "quality.md"], datetime(2031, 1, 1, tzinfo=timezone.utc))
    page = render(demo).page
    stamps = {m["path"]: m["machine"] for m in STAMP.finditer(page)}
    assert stamps["results/demo/filtering/quality.md"].startswith(f"machines: {XEON}; {EPYC} (the run's,")
    (demo / "wall_times.tsv").unlink()
    (demo / "wall_times.tsv").write_text("part\tstarted\tended\tseconds\texit\tmachine\n")
    stamps = {m["path"]: m["machine"] for m in STAMP.finditer(render(demo).page)}
    assert stamps["results/demo/filtering/quality.md"].startswith("machine: not recorded")


@pytest.mark.parametrize("name", [t.path for t in DEMO] + list(DEMO_EXTRA))
def test_a_missing_demo_file_is_a_one_line_error(demo: Path, name: str, capsys) -> None:  # noqa: ANN001
    (demo / name).unlink()
    assert run("--results", "results/demo", "--output", "docs/results.md") == 2
    err = one_line_error(capsys)
    assert f"results/demo/{name}: not found" in err and "make demo" in err, err
    assert not Path("docs/results.md").exists()


README = """# marginmine

Intro text, kept as it is.\r
<!-- rendered: key-result begin -->
an old table
<!-- rendered: key-result end -->

## Quick start
text after, kept
<!-- rendered: demo-time begin -->
<!-- rendered: demo-time end -->
the end, kept
"""


def test_readme_key_result_block_is_replaced_and_nothing_else(demo: Path, capsys) -> None:  # noqa: ANN001
    Path("README.md").write_bytes(README.encode())
    assert run("--results", "results/demo", "--output", "docs/results.md", "--readme", "README.md") == 0
    text = Path("README.md").read_bytes().decode()
    head, rest = text.split(marker("key-result") + "\n", 1)
    block, tail = rest.split(marker("key-result", "end") + "\n", 1)
    assert head == README.split(marker("key-result"))[0]
    after = README.split(marker("key-result", "end") + "\n")[1]
    assert tail.split(marker("demo-time"))[0] == after.split(marker("demo-time"))[0]
    assert tail.split(marker("demo-time", "end"))[1] == after.split(marker("demo-time", "end"))[1]
    assert "an old table" not in block
    rows = [line for line in block.splitlines() if line.startswith("| ")]
    assert rows[0] == "| method | N | training seeds | test BLEU | vs ratio | p | test chrF | chrF vs ratio | chrF p |"
    assert [r.split(" | ")[0] for r in rows[1:]] == ["| ratio", "| cosine", "| random"]
    mean, vs = r"\d+\.\d\d ± \d+\.\d\d", r"[+-]\d+\.\d\d \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\]"  # BLEU's and chrF's
    assert re.search(rf"^\| ratio \| 20k \| 1, 2 \| \*\*{mean}\*\* \|  \|  \| \*\*{mean}\*\* \|  \|  \|$",
                     rows[1], re.M), rows[1]
    assert re.search(rf"^\| cosine \| 20k \| 1, 2 \| {mean} \| {vs} \| \d\.\d{{4}}( \(\d\))? \| {mean} \| {vs} "
                     r"\| \d\.\d{4} \|$", rows[2], re.M), rows[2]
    stamp = STAMP.search(block)
    assert stamp and stamp["path"] == "results/demo/comparison.tsv" and stamp["machine"].startswith(f"machine: {EPYC}")
    time = text.split(marker("demo-time") + "\n", 1)[1].split(marker("demo-time", "end"))[0]
    assert "**60.0 minutes** of wall time on Intel Xeon, 4 cores, avx512f, finished, 1 invocation summed" in time, time
    assert STAMP.search(time)["path"] == "results/demo/wall_times.tsv"
    # a second render changes nothing (the same bytes, the file not rewritten)
    before = Path("README.md").stat().st_mtime_ns
    assert run("--results", "results/demo", "--output", "docs/results.md", "--readme", "README.md") == 0
    assert Path("README.md").read_bytes().decode() == text and Path("README.md").stat().st_mtime_ns == before


def test_missing_markers_are_a_one_line_error_and_nothing_is_written(demo: Path, capsys) -> None:  # noqa: ANN001
    Path("README.md").write_text("# marginmine\n\nno markers\n")
    assert run("--results", "results/demo", "--output", "docs/results.md", "--readme", "README.md") == 2
    err = one_line_error(capsys)
    assert "README.md: has no block <!-- rendered: key-result begin -->" in err, err
    assert not Path("docs/results.md").exists() and Path("README.md").read_text() == "# marginmine\n\nno markers\n"


@pytest.mark.parametrize("text,message", [
    ("<!-- rendered: demo-bucc begin -->\n", "has no end marker"),
    ("<!-- rendered: demo-bucc end -->\n", "ends without its begin marker"),
    ("x <!-- rendered: demo-bucc begin -->\n<!-- rendered: demo-bucc end -->\n", "not alone on its line"),
    ("<!-- rendered: nonsense begin -->\n<!-- rendered: nonsense end -->\n", "is not one marginmine docs-results"),
    ("no block\n", "has no rendered block"),
])
def test_bad_blocks_are_refused(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        replace_blocks(text, {"demo-bucc": "x"}, "page.md")


def build_published(res: Path) -> Path:
    """results/demo/published as make published leaves it (no composition or quality table)."""
    from marginmine.evaluate.votereport import write_report
    from marginmine.report.summary import write_summary

    pub = res / "published"
    pub.mkdir()
    write_comparison(res.parent.parent / "suite-runs", pub, {"ratio": 0.10, "eq9": 0.11}, (XEON, EPYC))
    write_tables(pub)
    (pub / "composition.md").unlink()
    (pub / "quality.md").unlink()
    write_summary(["system", "N", "test_bleu"], [{"system": "eq9", "N": "20k", "test_bleu": 30.5}],
                  pub / "summary.tsv", pub / "summary.md", "The published scorers (demo)",
                  ["comparison.tsv"], machines="Machines: see comparison.md.")
    write_report([{"direction": "en-de", "dev_bleu": 20.0, "test_bleu": 21.0}], [], [],
                 pub / "votes.tsv", pub / "votes.md", "Translate-then-vote (demo)")
    for d in ("en-de", "de-en"):
        (res / "translate" / d).mkdir(parents=True)
        (res / "translate" / d / "bleu.json").write_text(json.dumps({"meta": {"train_machine": XEON,
                                                                               "machine": XEON}}))
    from marginmine.evaluate.shortcut import write_tables as write_shortcut
    from marginmine.report.claim_list import CLAIMS
    from marginmine.report.claims import write_claims

    write_shortcut([{"scorer": "mlp-60", "group": "multi30k", "pairs": 848, "median_true": 1.0, "median_repaired": -1.0,
                     "auc": 0.8, "auc_vs_positives": 0.3, "cosine_auc": 0.99, "cosine_auc_vs_positives": 0.99,
                     "flag": "below chance"}], pub / "shortcut.tsv", pub / "shortcut.md", "Shortcut check (demo)")
    write_claims(CLAIMS, pub, pub / "claims.tsv", pub / "claims.md", "Claims (demo)", "20k")
    write_wall_times(pub / "wall_times.tsv", [("I: rescoring", START, END, EPYC)])
    return pub


def test_the_published_part_and_a_page_block(demo: Path) -> None:
    build_published(demo)
    Path("docs").mkdir()
    page = Path("docs/published-scorers.md")
    page.write_text(f"# The suite\n\n{marker('published-summary')}\n{marker('published-summary', 'end')}\n\n"
                    f"{marker('published-quality')}\n{marker('published-quality', 'end')}\ntail\n")
    assert run("--results", "results/demo", "--output", "docs/results.md", "--page", str(page)) == 0
    text = Path("docs/results.md").read_text()
    suite = text.split("## The published scorers' suite (`results/demo/published`)", 1)[1]
    stamps = {m["path"]: m["machine"] for m in STAMP.finditer(suite)}
    written = {f"results/demo/published/{t.path}" for t in PUBLISHED} - {
        "results/demo/published/composition.md", "results/demo/published/quality.md"}
    assert set(stamps) == written
    assert stamps["results/demo/published/summary.md"].startswith(f"machines: {XEON}; {EPYC} (where its NMT")
    assert stamps["results/demo/published/votes.md"].startswith(f"machine: {XEON} (where the translators")
    assert "### The published scorers (demo)" in suite and "Machines: see comparison.md." in suite
    assert ("Not written: `results/demo/published/quality.md`, `results/demo/published/composition.md`: "
            "`make published` writes") in suite
    filled = page.read_text()
    assert filled.startswith("# The suite\n\n") and filled.endswith(f"{marker('published-quality', 'end')}\ntail\n")
    summary = filled.split(marker("published-summary"))[1].split(marker("published-summary", "end"))[0]
    assert "| eq9 | 20k | 30.5 |" in summary and "Rendered from `results/demo/published/summary.md`" in summary
    assert "`results/demo/published/quality.md` not written" in filled


def test_commit_is_the_repository_head_and_dirty_only_for_tracked_changes(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("readme\n")
    git("add", "code.py", "README.md")
    git("commit", "-q", "-m", "c")
    head = git("rev-parse", "--short", "HEAD")
    (tmp_path / "untracked.txt").write_text("x")
    assert commit_stamp(tmp_path) == head
    (tmp_path / "README.md").write_text("rendered\n")  # a page the render writes is not a change of the code
    assert commit_stamp(tmp_path, [tmp_path / "README.md"]) == head
    assert commit_stamp(tmp_path) == head + "+dirty"
    (tmp_path / "code.py").write_text("x = 2\n")
    assert commit_stamp(tmp_path, [tmp_path / "README.md"]) == head + "+dirty"
    assert commit_stamp(tmp_path / "nowhere").startswith("not recorded")


#: the smoke run's files docs-results reads (config/test.yaml's experiment: results/test)
SMOKE_FILES = [t.path for t in DEMO if t.key != "wall-times"] + ["comparison.tsv", "comparison_runs.tsv"]


def test_smoke_results_render(smoke: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The smoke run's real tables render (a writer's new format breaks this test): copied with their
    dates, beside a wall-times table (make writes it, the smoke run is snakemake alone)."""
    res = tmp_path / "results" / "test"
    for name in SMOKE_FILES:
        (res / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(smoke / "results" / "test" / name, res / name)
    write_wall_times(res / "wall_times.tsv", [("test", START, END, EPYC)])
    monkeypatch.chdir(tmp_path)
    rendered = render("results/test")
    stamps = {m["path"]: m for m in STAMP.finditer(rendered.page)}
    assert set(stamps) == {f"results/test/{t.path}" for t in DEMO}
    runs = (res / "comparison_runs.tsv").read_text().splitlines()[1].split("\t")
    assert runs[-2] and runs[-2] in stamps["results/test/comparison.md"]["machine"]
    for t in DEMO:
        section = rendered.blocks[f"demo-{t.key}"]
        assert "\n| " in section, (t.key, section[:500])  # a table under every stamp
    key = rendered.blocks["key-result"]
    assert "| ratio | 2k | 1, 2 | **" in key and "| random | 2k | 1 | " in key
