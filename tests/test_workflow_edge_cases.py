"""Workflow edge cases (issue 17, item 4): a missing data directory or protect file fails at
planning with one line naming the config key and the path; paths with spaces in data_dir and the
results directory (every path in every shell: block quoted)."""

from __future__ import annotations

import gzip
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from test_workflow import CORES, REPO, copy_workflow, plan_demo_with, snakemake


def error_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if "does not exist" in ln]


def test_missing_protect_file_fails_at_planning(tmp_path: Path) -> None:
    r = plan_demo_with(tmp_path, lambda cfg: cfg["protect"].append("wmt-newstest-ende/newstest2031.de"))
    assert r.returncode != 0
    lines = error_lines(r.stdout + r.stderr)
    assert lines and "protect: 'wmt-newstest-ende/newstest2031.de' is neither an eval set" in lines[0], lines
    assert "shared/data/wmt-newstest-ende/newstest2031.de does not exist" in lines[0]


def test_missing_data_dir_fails_at_planning(tmp_path: Path) -> None:
    missing = tmp_path / "no such data"
    r = plan_demo_with(tmp_path, lambda cfg: cfg.update(data_dir=str(missing)))
    assert r.returncode != 0
    lines = error_lines(r.stdout + r.stderr)
    assert lines and f"data_dir: {missing} does not exist (or is not a directory), but corpus.source reads" \
        in lines[0], lines


def test_token_bounds_that_keep_nothing_fail_at_planning(tmp_path: Path) -> None:
    r = plan_demo_with(tmp_path, lambda cfg: cfg["preprocess"].update(min_tokens=90))
    assert r.returncode != 0
    assert "preprocess.min_tokens 90 > preprocess.max_tokens 80: no pair could be kept" in r.stdout + r.stderr


def test_missing_local_source_file_names_its_key(tmp_path: Path) -> None:
    def change(cfg: dict) -> None:
        cfg["eval"]["extra"]["multi30k-flickr2016"]["src"] = "multi30k/test_2061_flickr.en.gz"

    r = plan_demo_with(tmp_path, change)
    assert r.returncode != 0
    lines = error_lines(r.stdout + r.stderr)
    assert lines and "eval.multi30k-flickr2016: " in lines[0] and "multi30k/test_2061_flickr.en.gz" in lines[0], lines


# --- paths with spaces: every path in every shell: block is quoted ----------------------------

# option strings the plan (marginmine.workflow) and the rules build with each path already quoted
PREQUOTED = {"params.langs", "params.args", "params.slice", "params.budget", "params.sha256", "params.extra",
             "params.sets", "params.langid", "params.heldout", "params.subsets", "params.plugins", "params.density",
             "params.tables", "params.held_out", "params.positives", "params.margins", "params.corpus",
             "params.top_n", "params.translated", "params.votes",
             "params.pretrained",  # fit_scorer's: the fixed flag "--pretrained " or nothing (PLAN.fit_pretrained_arg)
             "params.scores",  # report_samples': NAME=FILE,... items, each quoted by shlex (PLAN.scorer_files_args)
             "params.column",  # translate_shard's: the integer 0 or 1; translate_text's: "--column N" or nothing
             "params.caps",  # PLAN.caps_from: the results and work directories, each quoted by shlex
             "wildcards.seed"}  # the seed wildcard is constrained to digits


def test_every_shell_placeholder_is_quoted() -> None:
    placeholder = re.compile(r"\{(\w+(?:\.\w+)?)(?:\[\d+\])?(:q)?\}")
    unquoted, seen = [], 0
    for smk in sorted((REPO / "rules").glob("*.smk")):
        for block in re.findall(r"^    shell:\n((?:        .*\n)+)", smk.read_text(), re.M):
            for m in placeholder.finditer(block):
                seen += 1
                if not m.group(2) and m.group(1) not in PREQUOTED | {"threads"}:
                    unquoted.append(f"{smk.name}: {{{m.group(1)}}}")
    assert seen > 100 and not unquoted, unquoted


def test_dry_run_quotes_data_dir_and_results_dir_with_spaces(real_data: Path, tmp_path: Path) -> None:
    """Every command the demo (and its report) would run keeps such paths as one argument."""
    copy_workflow(tmp_path)
    (tmp_path / "shared data").symlink_to(real_data, target_is_directory=True)
    results = "results/with space"
    r = snakemake("-n", "-p", "demo", f"{results}/report/ledger.png", "--configfile", "config/demo.yaml",
                  "--config", f"data_dir={tmp_path / 'shared data'}", f"results_dir={results}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    commands = [ln.split("Shell command: ", 1)[1] for ln in r.stdout.splitlines() if ln.startswith("Shell command: ")]
    rules = set(re.findall(r"^rule (\w+):", r.stdout, re.M))
    assert len(commands) > 40 and {"demo_corpus", "preprocess_shard", "encoder_data", "eval_encoder", "eval_filter",
                                   "mining_benchmark_data", "evaluate_nmt", "report_figures"} <= rules
    broken = []
    for cmd in commands:
        for token in shlex.split(cmd):
            for head, tail in (("shared", "data"), ("results/with", "space")):
                if (head in token) != (f"{head} {tail}" in token) or token.split("/")[0] == tail:
                    broken.append((token, cmd[:80]))
    assert not broken, broken[:5]
    assert sum(f"'{tmp_path / 'shared data'}" in c for c in commands) > 10
    assert sum(f"'{results}/" in c for c in commands) > 10


@pytest.mark.slow
@pytest.mark.workflow
def test_preprocess_runs_with_spaces_in_data_dir_and_results_dir(real_data: Path, tmp_path: Path) -> None:
    """The preprocess slice of config/test.yaml (demo corpus from data_dir, split, filter with the
    protected sets from data_dir, ledger, overlap check), both paths holding a space."""
    copy_workflow(tmp_path)
    (tmp_path / "shared data").symlink_to(real_data, target_is_directory=True)
    r = snakemake("preprocess", "--configfile", "config/test.yaml", "--cores", CORES, "--config",
                  f"data_dir={tmp_path / 'shared data'}", "results_dir=results/test with space", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    out = tmp_path / "results/test with space/preprocess"
    ledger = json.loads((out / "ledger.json").read_text())
    corpus_lines = sum(1 for _ in gzip.open(tmp_path / "work/test/corpus/demo.tsv.gz", "rt"))
    assert ledger["pairs_in"] == corpus_lines and 0 < ledger["kept"] < corpus_lines
    check = json.loads((out / "overlap_check.json").read_text())
    assert check["overlapping_pairs"] == 0 and check["pairs"] == ledger["kept"]
    # the step exists only when the protected sets (read through the spaced data_dir) hold sentences
    assert "test_overlap" in {s["step"] for s in ledger["steps"]}


@pytest.mark.slow
@pytest.mark.workflow
def test_overestimated_expected_pairs_plans_and_runs_with_empty_shards(real_data: Path, tmp_path: Path) -> None:
    """config/test.yaml's preprocess slice at a smaller scale, with expected_pairs planning more
    shards than the corpus fills: the empty shards run like the others and the ledger adds up."""
    copy_workflow(tmp_path)
    cfg = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    cfg["corpus"]["source"]["scale"] = 0.02
    cfg["corpus"]["expected_pairs"] = 8000
    cfg["preprocess"].update(shard_size=1000, block=500)
    (tmp_path / "config" / "empty.yaml").write_text(yaml.safe_dump(cfg))
    r = snakemake("preprocess", "--configfile", "config/empty.yaml", "--cores", CORES, "--config",
                  f"data_dir={real_data}", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    split = sorted((tmp_path / "work/test/preprocess/split").glob("shard*.tsv.gz"))
    kept = sorted((tmp_path / "work/test/preprocess/kept").glob("shard*.tsv.gz"))
    assert len(split) == len(kept) == 8
    split_lines = [sum(1 for _ in gzip.open(p, "rt")) for p in split]
    kept_lines = [sum(1 for _ in gzip.open(p, "rt")) for p in kept]
    assert split_lines[-1] == 0 and 0 < split_lines[0], split_lines
    assert all(k == 0 for s, k in zip(split_lines, kept_lines) if s == 0)
    ledger = json.loads((tmp_path / "results/test/preprocess/ledger.json").read_text())
    corpus_lines = sum(1 for _ in gzip.open(tmp_path / "work/test/corpus/demo.tsv.gz", "rt"))
    assert ledger["pairs_in"] == corpus_lines and ledger["kept"] == sum(kept_lines) > 0
    check = json.loads((tmp_path / "results/test/preprocess/overlap_check.json").read_text())
    assert check["pairs"] == sum(kept_lines) and check["overlapping_pairs"] == 0
