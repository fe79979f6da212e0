"""The published scorers' suite (config `published:`, target `published`): planned through the
experiment's own rules, its files beside the experiment's and never one of them, its errors naming
the key; and the summary that joins its tables."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from marginmine.errors import InputError, MarginmineError
from marginmine.report.summary import read_table, selected_counts, summary_rows, write_summary
from marginmine.workflow.checks import check_scorer_config
from test_scorers import check_demo, plan
from test_workflow import REPO, copy_workflow, job_counts, snakemake

DEMO = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())


def _commands(stdout: str) -> list[str]:
    return sorted(re.findall(r"^\s*(?:Shell command: )?(marginmine [^\n]*)", stdout, re.M))


def test_the_suite_leaves_every_demo_job_as_it_was(real_data: Path, tmp_path: Path) -> None:
    """`demo` plans the same commands, byte for byte, with and without the published: section - so
    after `make published`, `snakemake -n demo` has nothing to do."""
    copy_workflow(tmp_path)
    without = {k: v for k, v in DEMO.items() if k != "published"}
    suite_only = set(DEMO["published"]["scorers"])  # an extra test set may name suite methods: not here
    without["eval"] = {**DEMO["eval"], "extra": {
        name: ({**s, "methods": [m for m in s["methods"] if m not in suite_only]} if "methods" in s else s)
        for name, s in DEMO["eval"]["extra"].items()}}
    for name, cfg in (("with.yaml", DEMO), ("without.yaml", without)):
        (tmp_path / name).write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = {}
    for name in ("with.yaml", "without.yaml"):
        r = snakemake("-n", "-p", "--forceall", "demo", "--configfile", name, "--config", f"data_dir={real_data}",
                      cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        out[name] = _commands(r.stdout)
    assert out["with.yaml"] == out["without.yaml"] and len(out["with.yaml"]) > 30
    assert not [c for c in out["with.yaml"] if "published" in c]


def test_published_plans_its_encoders_scores_selections_systems_and_tables(real_data: Path, tmp_path: Path) -> None:
    copy_workflow(tmp_path)
    r = snakemake("-n", "-p", "published", "--configfile", "config/demo.yaml", "--config", f"data_dir={real_data}",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    counts = job_counts(r.stdout)
    suite = DEMO["published"]
    # the demo DAN (the baselines' and the miner's) and the suite's encoders; no random-init twin
    assert counts["train_encoder"] == 1 + len(suite["encoders"])
    new_encoders = {s["encoder"] for s in suite["scorers"].values() if "encoder" in s}
    assert counts["embed_shard"] == 4 * (1 + len(new_encoders))
    # the demo's score files for the baselines (dan's ratio and cosine, use's), the suite's own for dan
    # (eq9, eq10, csls) and each new encoder, and each fitted scorer's own (refitting its head rescores
    # nothing else)
    fitted = [n for n, s in suite["scorers"].items() if s["kind"] in ("calibrated", "mlp")]
    baseline_encoders = {DEMO["scorers"][b].get("encoder", "dan") for b in suite["baselines"] if b in DEMO["scorers"]}
    assert baseline_encoders == {"dan", "use"}
    assert counts["score_shard"] == 4 * (len(baseline_encoders) + 1 + len(new_encoders) + len(fitted))
    assert counts["fit_scorer"] == len(fitted) == 16  # use-mlp-40/60/80/100 and use-mlp-random too
    use_mlp = re.search(r"marginmine fit-scorer [^\n]*--name use-mlp-60 [^\n]*", r.stdout).group(0)
    assert "--encoder results/demo/encoders/use " in use_mlp and "work/demo/embed/use/shard0000.en.npy" in use_mlp
    assert "--positives encoder_data --positives-size 4000 --pretrained " in use_mlp
    # over USE the news test sets the DAN trains on are fair positives, all of them
    use_news = re.search(r"marginmine fit-scorer [^\n]*--name use-mlp-60-news [^\n]*", r.stdout).group(0)
    assert "--positives files --positives-size 0 --positives-files en,de," in use_news
    assert "--pretrained " in use_news and "newstest2010.de" in use_news
    mlp = re.search(r"marginmine fit-scorer [^\n]*--name mlp-60 [^\n]*", r.stdout).group(0)
    assert "--corpus work/demo/preprocess/kept/shard0000.tsv.gz,work/demo/embed/dan/shard0000.en.npy," in mlp
    assert f"--exclude-pairs {real_data}/paracrawl-human-eval-en-de/" in mlp
    # positives: a sample of the encoder data (heads.positives), or the held-out news for the -news controls
    assert "--positives encoder_data --positives-size 4000 " in mlp
    assert "--pretrained" not in mlp  # the DAN trains on the encoder data: its pairs leave the positives
    news = re.search(r"marginmine fit-scorer [^\n]*--name mlp-60-news [^\n]*", r.stdout).group(0)
    assert "--positives held_out --corpus work/demo/preprocess/kept/" in news
    fit = re.search(r"marginmine fit-scorer [^\n]*--name hn-cal [^\n]*", r.stdout).group(0)
    assert "--name hn-cal" in fit and "--encoder results/demo/encoders/dan-hn " in fit
    assert "--output work/demo/heads/hn-cal" in fit
    news_dir = f"{real_data}/wmt-newstest-ende"
    assert f"en,de,{news_dir}/newstest2019-ende.en,{news_dir}/newstest2019-ende.de" in fit
    assert "newstest2017.de" in fit and "newstest2012.de" in fit
    assert "--encoder-data work/demo/encoder/data/manifest.json" in fit
    cal = [c for c in re.findall(r"marginmine score [^\n]*", r.stdout)
           if "--output work/demo/score/published/dan-hn/hn-cal/" in c]
    assert len(cal) == 4
    assert '"hn-cal": {"kind": "calibrated", "encoder": "dan-hn", "head": "work/demo/heads/hn-cal"}' in cal[0]
    assert "--src-embeddings work/demo/embed/dan-hn/" in cal[0] and '"hn-ratio"' not in cal[0]
    assert suite["baselines"] == ["ratio", "cosine", "random", "use-ratio", "use-cosine"]
    # two seeds each: the methods, ratio, cosine, random, use-ratio, use-cosine (the demo's own), and
    # published.small's five at 5k
    assert suite["small"] == {"size": "5k", "methods": ["mlp-60", "cosine", "random", "use-mlp-60", "use-cosine"]}
    assert counts["train_nmt"] == 2 * len(suite["methods"]) + 2 * 5 + 2 * 5
    # the suite's intrinsic evaluation: every encoder of its table under cosine, ratio and Eq. 9 / 10
    assert counts["published_eval_encoder"] == 1 + len(suite["encoders"])
    evals = [c for c in re.findall(r"marginmine eval-encoder [^\n]*", r.stdout) if "results/demo/published/eval/" in c]
    assert len(evals) == 1 + len(suite["encoders"])
    assert all("--margins absolute,ratio,eq9,eq10,distance " in c for c in evals)
    for table in ("published_encoder_report", "published_eval_mining", "published_eval_filter",
                  "published_composition", "published_compare", "published_summary"):
        assert counts[table] == 1, table
    score = re.findall(r"marginmine score [^\n]*", r.stdout)
    on_dan = [c for c in score if re.search(r"--output work/demo/score/published/dan/shard", c)]
    assert len(on_dan) == 4 and '"eq9": {"kind": "eq9", "encoder": "dan"}' in on_dan[0]
    assert '"ratio"' not in on_dan[0] and "--src-embeddings work/demo/embed/dan/" in on_dan[0]
    assert [c for c in score if "--output work/demo/score/dan/" in c][0].count('"kind"') == 3  # ratio, cosine, distance
    select = re.search(r"marginmine select [^\n]*--method eq10 [^\n]*", r.stdout).group(0)
    assert "work/demo/score/published/dan/shard0000.scores.tsv.gz" in select
    train = {m.group(1): m.group(0)
             for m in re.finditer(r"marginmine train-encoder [^\n]*--output (\S+) [^\n]*", r.stdout)}
    assert '"miner": "results/demo/encoder"' in train["results/demo/encoders/dan-hn"]
    dan_de = train["results/demo/encoders/dan-de"]
    assert '"directions": 1' in dan_de and '"margin": 0.0' in dan_de
    compares = re.findall(r"marginmine compare [^\n]*", r.stdout)  # the demo's compare is not needed
    compare = next(c for c in compares if "--tsv results/demo/published/comparison.tsv" in c)
    assert "--headline ratio" in compare
    # and every system against each of published.references, a table each
    for ref in suite["references"]:
        versus = next(c for c in compares if f"--tsv results/demo/published/versus/{ref}/comparison.tsv" in c)
        assert f"--headline {ref} " in versus and "nmt/mlp-60-news.20k/seed2/bleu.json" in versus
    assert len(compares) == 1 + len(suite["references"]) == 5
    assert all(f"nmt/{m}.20k/seed{s}/bleu.json" in compare for m in ["ratio", *suite["methods"]] for s in (1, 2))
    assert all(f"nmt/{m}.5k/seed{s}/bleu.json" in compare for m in suite["small"]["methods"] for s in (1, 2))
    mining = re.search(r"marginmine eval-mining [^\n]*", r.stdout).group(0)
    assert "--tsv results/demo/published/bucc.tsv" in mining and "dan-hn=results/demo/encoders/dan-hn" in mining
    assert '"ratio": {"kind": "ratio", "encoder": "dan"}' in mining and '"cosine": {"kind": "cosine"' in mining
    assert '"distance": {' not in mining  # an experiment scorer that is not a baseline has no suite rows
    summary = re.search(r"marginmine summary [^\n]*", r.stdout).group(0)
    assert "--comparison results/demo/published/comparison.tsv" in summary
    assert "results/demo/select/eq9.20k.json" in summary


def test_the_demo_config_passes_the_checks() -> None:
    check_demo(lambda c: None)


@pytest.mark.parametrize("change,message", [
    (lambda c: c["published"].update(baselines=["cosine", "distnace"]),
     "published.baselines ['distnace']: neither scorers nor selection methods (use-ratio, use-cosine, "),
    (lambda c: c["published"]["scorers"].update(cosine={"kind": "cosine"}),
     "published.scorers.cosine: also a name in scorers:"),
    (lambda c: c["published"].update(encoders=["dan-hn", "no-such-model"]),
     "published.encoders: 'no-such-model' is not a key of encoder.models"),
    (lambda c: c["published"]["scorers"].update(x={"kind": "ratio", "encoder": "laser"}),
     "published.scorers.x.encoder: 'laser' is not an encoder"),
    (lambda c: c["published"]["scorers"].update(x={"kind": "eq11"}),
     "published.scorers.x: score kind 'eq11' is not registered"),
    (lambda c: c["published"].update(methods=["eq9", "ratoi"]), "published.methods ['ratoi']: not published.scorers"),
    (lambda c: c.pop("heads"), "published.scorers.hn-cal: kind calibrated is checked on held-out pairs; give them as "
                               "heads.held_out"),
    (lambda c: c["published"]["scorers"]["eq9"].update(positives={"from": "held_out"}),
     "published.scorers.eq9.positives: kind eq9 is not fitted, it takes no positives"),
    (lambda c: c["published"]["scorers"]["mlp-60"].update(positives={"from": "files"}),
     "published.scorers.mlp-60.positives: from files, but no files are given"),
    (lambda c: c["published"].update(references=["cosine", "mlp-20"]),
     "published.references ['mlp-20']: not among published.methods or published.baselines"),
    (lambda c: c["published"]["scorers"].update(x={"kind": "calibrated", "params": {"dropout": 1.5}}),
     "published.scorers.x: dropout must be in [0, 1)"),
])
def test_published_config_errors_name_the_key(change, message: str) -> None:
    with pytest.raises(MarginmineError) as err:
        check_demo(change)
    assert message in str(err.value)


@pytest.mark.parametrize("change,message", [
    (lambda c: c["published"].pop("baselines"), "'baselines' is a required property"),
    (lambda c: c["published"].update(baselines=[]), "[] should be non-empty"),
])
def test_the_schema_requires_the_suites_baselines(change, message: str) -> None:
    with pytest.raises(jsonschema.ValidationError) as err:
        check_demo(change)
    assert err.value.message == message
    # the package refuses it too, for a caller that does not validate against the schema
    with pytest.raises(MarginmineError, match="published.baselines: name at least one scorer or random"):
        check_scorer_config({"ratio": {"kind": "ratio", "encoder": "dan"}}, ["ratio"], ["dan"],
                            suite={"methods": []}, suite_scorers={})


def test_the_workflow_refuses_a_bad_suite_at_plan_time(tmp_path: Path) -> None:
    """The checks above run when the workflow plans (one case: they are the package's)."""
    r = plan(tmp_path, "config/demo.yaml", lambda c: c["published"].update(methods=["eq9", "ratoi"]), "published")
    assert r.returncode != 0 and "published.methods ['ratoi']: not published.scorers" in r.stdout + r.stderr, \
        (r.stdout + r.stderr)[-2000:]


def _tsv(path: Path, rows: list[list[object]]) -> Path:
    path.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    return path


def test_summary_joins_the_tables_and_leaves_what_they_lack_empty(tmp_path: Path) -> None:
    intrinsic = _tsv(tmp_path / "i.tsv", [["encoder", "set", "margin", "pairs", "err_avg"],
                                          ["dan", "tatoeba", "cosine", 1000, 5.5],
                                          ["dan", "tatoeba", "ratio", 1000, 4.4],
                                          ["hn", "tatoeba", "ratio", 1000, 3.9], ["dan", "tatoeba", "eq10", 1000, 4.1]])
    bucc = _tsv(tmp_path / "b.tsv", [["scorer", "retrieval", "f1"], ["ratio", "fwd", 0.5], ["ratio", "max", 0.6],
                                     ["cosine", "fwd", 0.4]])
    quality = _tsv(tmp_path / "q.tsv", [["data", "scorer", "auc"], ["paracrawl-human-eval-en-de", "ratio", 0.621],
                                        ["demo corpus (preprocessed)", "ratio", 0.758],
                                        ["paracrawl-human-eval-en-de", "BiCleaner (shipped)", 0.547]])
    comparison = _tsv(tmp_path / "c.tsv", [
        ["test_set", "method", "N", "bleu_mean", "bleu_sd", "seeds", "p_value"],
        ["test", "ratio", "20k", 6.01, 0.16, "1,2", ""],
        ["test", "random", "20k", 2.19, "", "1", "0.0010"], ["test/x", "ratio", "20k", 9.0, 0.1, "1,2", ""]])
    sel = tmp_path / "ratio.20k.json"
    sel.write_text('{"method": "ratio", "selected": 20000}')
    scorers = {"ratio": {"kind": "ratio", "encoder": "dan"}, "cosine": {"kind": "cosine", "encoder": "dan"},
               "hn-ratio": {"kind": "ratio", "encoder": "hn"}, "eq10": {"kind": "eq10", "encoder": "dan"},
               "cal": {"kind": "calibrated", "encoder": "dan"}, "toy": {"kind": "not-registered", "encoder": "dan"}}
    fields, rows = summary_rows(
        scorers, ["ratio", "random"], ["20k"], read_table(intrinsic, ["encoder"]), read_table(bucc, ["f1"]),
        read_table(quality, ["auc"]), read_table(comparison, ["bleu_mean"]), selected_counts([sel]))
    by = {r["system"]: r for r in rows}
    assert list(by) == ["ratio", "cosine", "hn-ratio", "eq10", "cal", "toy", "random"]
    # each kind under the margin it mines with (calibrated: retrieval by cosine); none for a kind unknown here
    assert by["eq10"]["err_tatoeba"] == 4.1 and by["cal"]["err_tatoeba"] == 5.5 and by["toy"]["err_tatoeba"] is None
    assert by["ratio"]["paracrawl_auc"] == 0.621 and by["ratio"]["demo_auc"] == 0.758
    assert by["ratio"]["bucc_f1"] == pytest.approx(60.0) and by["ratio"]["bucc_retrieval"] == "max"
    assert by["ratio"]["err_tatoeba"] == 4.4 and by["cosine"]["err_tatoeba"] == 5.5
    assert by["hn-ratio"]["err_tatoeba"] == 3.9
    assert by["ratio"]["test_bleu"] == 6.01 and by["ratio"]["pairs"] == 20000 and by["ratio"]["p_value"] is None
    assert by["random"]["test_bleu"] == 2.19 and by["random"]["bleu_sd"] is None and by["random"]["err_tatoeba"] is None
    assert by["hn-ratio"]["test_bleu"] is None and by["hn-ratio"]["bucc_f1"] is None  # not trained, not mined
    write_summary(fields, rows, tmp_path / "s.tsv", tmp_path / "s.md", "t", [str(comparison)])
    lines = (tmp_path / "s.tsv").read_text().splitlines()
    assert lines[0].split("\t") == fields and lines[1].split("\t")[fields.index("test_bleu")] == "6.0"
    assert "| hn-ratio | ratio | hn | 20k |  |" in (tmp_path / "s.md").read_text()


def test_summary_says_which_machine_each_system_ran_on(tmp_path: Path) -> None:
    """The suite's systems may be trained in two sessions on two CPU models (BLEU differs between
    them): the summary names the machines from the comparison's runs table."""
    from marginmine.report.summary import runs_machines

    epyc, xeon = "AMD EPYC, 2 cores, avx2", "Intel Xeon, 2 cores, avx512f"
    runs = _tsv(tmp_path / "runs.tsv",
                [["method", "N", "seed", "pairs", "test_bleu", "train_machine", "decode_machine"],
                 ["ratio", "20k", 1, 20000, 6.0, epyc, epyc],
                 ["eq9", "20k", 2, 20000, 5.0, xeon, xeon],
                 ["random", "20k", 1, 20000, 2.0, "", ""]])
    line = runs_machines(runs)
    assert line == (f"Machines (BLEU differs between CPU models): eq9.20k seed 2 trained and decoded on {xeon}; "
                    "random.20k seed 1 trained and decoded on not recorded; "
                    f"ratio.20k seed 1 trained and decoded on {epyc}.")
    write_summary(["system"], [{"system": "ratio"}], tmp_path / "s.tsv", tmp_path / "s.md", "t", [str(runs)], line)
    assert f"\n{line}\n\nJoined from: `{runs}`" in (tmp_path / "s.md").read_text()
    old = _tsv(tmp_path / "old_runs.tsv", [["method", "N", "seed"], ["ratio", "20k", 1]])
    with pytest.raises(InputError, match="no column train_machine, decode_machine"):
        runs_machines(old)


def test_summary_refuses_a_table_without_its_columns(tmp_path: Path) -> None:
    old = _tsv(tmp_path / "comparison.tsv", [["method", "N", "bleu"], ["ratio", "20k", 6.0]])
    with pytest.raises(InputError, match=r"comparison.tsv:1: no column test_set, bleu_mean"):
        read_table(old, ["test_set", "method", "N", "bleu_mean"])
    (tmp_path / "empty.tsv").write_text("")
    with pytest.raises(InputError, match="empty table"):
        read_table(tmp_path / "empty.tsv", ["x"])
