"""Named scorers: the kind registry, self-describing score files, plan-time errors naming the
config key, the demo's scorers (one over the DAN's random-init twin), the top-level seed, and the
defaults the CLI and the schema share."""

from __future__ import annotations

import copy
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import jsonschema
import numpy as np
import pytest
import yaml

import toy_scores  # noqa: F401  (registers the kind length-ratio, as a user's plugin module does)
from doubles import TrigramEncoder
from marginmine.errors import InputError, MarginmineError
from marginmine.evaluate.filtereval import read_paracrawl_eval
from marginmine.scoring import KINDS, Batch, kind_params, load_plugins, make_kind, parse_scorers, register
from marginmine.scoring.files import EncoderEmbeddings, ScoreSettings, score_batch
from marginmine.search.margin import filter_scores
from marginmine.workflow.checks import check_scorer_config, check_suite_encoders
from test_workflow import REPO, copy_workflow, job_counts, snakemake

FULL_SCHEMA = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
SCHEMA = FULL_SCHEMA["properties"]
DEMO = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())


def test_the_cli_and_dataclass_defaults_are_the_schemas() -> None:
    """Each default has one home for the workflow (the schema); the CLI's come from the settings
    dataclasses; the two must agree."""
    from marginmine import defaults
    from marginmine.preprocess.pipeline import PreprocessSettings

    assert SCHEMA["scoring"]["properties"]["k"]["default"] == defaults.K
    assert kind_params("ratio") == {"k": defaults.K}
    assert kind_params("distance") == kind_params("ratio") and kind_params("cosine") == {}
    assert ScoreSettings.__dataclass_fields__["batch_size"].default == defaults.BATCH_SIZE == \
        SCHEMA["scoring"]["properties"]["batch_size"]["default"]
    assert defaults.SEED == SCHEMA["seed"]["default"]
    assert SCHEMA["heads"]["properties"]["positives"]["default"] == \
        {"from": defaults.HEAD_POSITIVES, "size": defaults.HEAD_POSITIVES_SIZE}
    assert ScoreSettings.__dataclass_fields__["index"].default.kind == defaults.INDEX == \
        SCHEMA["scoring"]["properties"]["index"]["default"]
    bucc = SCHEMA["mining_eval"]["properties"]
    assert (bucc["share"]["default"], bucc["distractors"]["default"], bucc["mono_max"]["default"]) == \
        (defaults.BUCC_SHARE, defaults.BUCC_DISTRACTORS, defaults.BUCC_MONO_MAX)
    pre = SCHEMA["preprocess"]["properties"]
    for name in ("min_tokens", "max_tokens", "max_overlap", "max_ratio", "langid_min_prob"):
        assert PreprocessSettings.__dataclass_fields__[name].default == pre[name]["default"], name
    # the choices the command line offers are the schema's
    assert list(defaults.INDEX_KINDS) == SCHEMA["scoring"]["properties"]["index"]["enum"]
    assert list(defaults.DECODERS) == SCHEMA["nmt"]["properties"]["decoder"]["enum"]
    assert defaults.DEFAULT_DECODER == SCHEMA["nmt"]["properties"]["decoder"]["default"]
    # the beam and a translation's chunk: the CLI's, the functions' and the schema's (nmt, translators)
    assert defaults.BEAM == SCHEMA["nmt"]["properties"]["beam"]["default"] == \
        SCHEMA["translators"]["properties"]["beam"]["default"]
    assert defaults.CHUNK_LINES == SCHEMA["translators"]["properties"]["chunk_lines"]["default"]
    from marginmine.nmt.evaluate import translate, translate_files
    from marginmine.nmt.significance import SignificanceSettings

    assert inspect.signature(translate).parameters["beam"].default == defaults.BEAM
    assert inspect.signature(translate_files).parameters["beam"].default == defaults.BEAM
    fields = SignificanceSettings.__dataclass_fields__
    assert (fields["resamples"].default, fields["seed"].default) == \
        (defaults.BOOTSTRAP_RESAMPLES, defaults.BOOTSTRAP_SEED)
    assert list(defaults.POSITIVE_SOURCES) == FULL_SCHEMA["definitions"]["positives"]["properties"]["from"]["enum"]


def test_registry_refuses_unknown_kinds_params_and_names() -> None:
    with pytest.raises(MarginmineError, match=r"scorers.x: score kind 'ratoi' is not registered \(known: absolute, "):
        make_kind("ratoi", {}, "scorers.x")
    with pytest.raises(MarginmineError, match=r"kind ratio takes no param\(s\) \['kk'\] \(its params: k\)"):
        make_kind("ratio", {"kk": 3})
    with pytest.raises(MarginmineError, match="k must be a positive integer"):
        make_kind("ratio", {"k": 0})
    with pytest.raises(MarginmineError, match="must match .* and not be random or unfiltered"):
        parse_scorers({"random": {"kind": "ratio"}})
    with pytest.raises(MarginmineError, match="scorer 'a' names no kind"):
        parse_scorers({"a": {"k": 4}})
    with pytest.raises(MarginmineError, match=r"plugins: cannot import 'no_such_module_xyz'"):
        load_plugins(["no_such_module_xyz"])


def test_a_plugin_kind_scores_beside_the_built_in_ones(paracrawl_tsv: Path) -> None:
    """A new kind is one registered class (tests/toy_scores.py, a user's plugin module): it gets its
    column from the same batch machinery; the built-in kinds give exactly the margins of
    marginmine.search.margin on the real ParaCrawl pairs. (That the ratio scorer separates
    human-labelled good pairs from bad is tested on the trained smoke DAN: test_smoke.py.)"""

    data = read_paracrawl_eval(paracrawl_tsv)
    kinds = parse_scorers({"ratio": {"kind": "ratio"}, "len": {"kind": "length-ratio"},
                           "cos": {"kind": "cosine"}})
    scores = score_batch(data.src, data.tgt, 0, EncoderEmbeddings(TrigramEncoder(), "en", "de"),
                         ScoreSettings(tuple(kinds.items())))
    assert list(scores) == ["ratio", "len", "cos"] and all(len(v) == len(data.src) for v in scores.values())
    lengths = [min(len(s), len(t)) / max(len(s), len(t), 1) for s, t in zip(data.src, data.tgt)]
    assert np.allclose(scores["len"], lengths, atol=1e-6)
    enc = TrigramEncoder()
    ref = filter_scores(enc.encode(data.src, "en").astype(np.float16), enc.encode(data.tgt, "de").astype(np.float16),
                        data.src, data.tgt, 4, ["ratio"])
    assert np.array_equal(scores["ratio"], ref["ratio"]) and np.array_equal(scores["cos"], ref["cosine"])


def test_a_kind_must_return_one_score_per_pair() -> None:
    @register("test-broken")
    @dataclass(frozen=True)
    class Broken:
        mines: ClassVar[str | None] = None

        def score(self, batch: Batch) -> np.ndarray:
            return np.zeros(len(batch) + 1)

    try:
        with pytest.raises(ValueError, match=r"scorer b \(Broken\) returned shape \(4,\) for a batch of 3 pairs"):
            score_batch(["a", "b", "c"], ["x", "y", "z"], 0, EncoderEmbeddings(TrigramEncoder(), "en", "de"),
                        ScoreSettings((("b", make_kind("test-broken")),)))
    finally:
        del KINDS["test-broken"]


def plan(tmp_path: Path, config: str, change=None, *targets: str):
    cfg = yaml.safe_load((REPO / config).read_text())
    if change:
        change(cfg)
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))  # the scorers keep their order
    return snakemake("-n", "-p", *targets, "--configfile", str(path))


def test_the_demo_scores_selects_and_evaluates_the_random_twin_without_training_nmt_on_it(
        real_data: Path, tmp_path: Path) -> None:
    copy_workflow(tmp_path)
    r = snakemake("-n", "-p", "demo", "--configfile", "config/demo.yaml", "--config", f"data_dir={real_data}",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    counts = job_counts(r.stdout)
    assert counts["embed_shard"] == 12 == counts["score_shard"]  # 4 shards x (dan, dan-random, use)
    # 7 scorers and random at 20k, and ratio >= 1.04 (selection.thresholds); NMT: use-ratio, use-cosine
    # and random, two seeds each
    assert counts["select_top"] == 9 and counts["train_nmt"] == 6
    assert "--method ratio --threshold 1.04" in r.stdout
    score = re.findall(r"marginmine score [^\n]*", r.stdout)
    twin = [c for c in score if "work/demo/score/dan-random/" in c]
    assert len(twin) == 4 and all("--src-embeddings work/demo/embed/dan-random/" in c for c in twin)
    assert '"dan-random-ratio": {"kind": "ratio", "encoder": "dan-random"}' in twin[0]
    own = [c for c in score if "work/demo/score/dan/" in c][0]
    assert '"ratio": {"kind": "ratio", "encoder": "dan"}' in own and '"cosine"' in own and "dan-random" not in own
    select = re.search(r"marginmine select [^\n]*--method dan-random-ratio [^\n]*", r.stdout).group(0)
    assert "work/demo/score/dan-random/shard0000.scores.tsv.gz" in select and "--column " not in select
    assert "dan-random-ratio.20k.tsv.gz" in re.search(r"marginmine composition [^\n]*", r.stdout).group(0)
    for cmd in ("eval-filter", "eval-mining"):
        line = re.search(rf"marginmine {cmd} [^\n]*", r.stdout).group(0)
        assert ("--encoder use=results/demo/encoders/use dan=results/demo/encoder "
                "dan-random=work/demo/encoders-random/dan") in line, line
    assert "nmt/dan-random-ratio" not in r.stdout
    # the twin is built by the DAN's own trainer, untrained, from the DAN's own params (the workflow
    # knows no encoder internals such as max_steps)
    train = {m.group(1): m.group(0)
             for m in re.finditer(r"marginmine train-encoder [^\n]*--output (\S+) [^\n]*", r.stdout)}
    dan, twin = train["results/demo/encoder"], train["work/demo/encoders-random/dan"]
    params = [re.search(r"--params ('[^']*')", c).group(1) for c in (dan, twin)]
    assert params[0] == params[1] and "--untrained" in twin and "--untrained" not in dan
    assert "--max-minutes" in dan and "--max-minutes" not in twin


def check_demo(change) -> None:
    """The demo config, changed, through the workflow's plan-time checks (marginmine.workflow.checks)
    and its schema, without planning: the workflow passes the encoders it builds (the DAN, its twin,
    the extra encoders (USE), the suite's encoders)."""
    cfg = copy.deepcopy(DEMO)
    change(cfg)
    jsonschema.validate(cfg, FULL_SCHEMA)
    default = cfg["encoder"]["default"]
    suite = cfg.get("published") or {}

    def fill(scorers):
        return {n: {**s, "encoder": s.get("encoder", default)} for n, s in scorers.items()}

    check_suite_encoders(suite.get("encoders", []), cfg["encoder"]["models"])
    check_scorer_config(fill(cfg["scorers"]), cfg["selection"]["methods"],
                        [default, f"{default}-random", *cfg["encoder"]["extra"], *suite.get("encoders", [])],
                        plugins=cfg.get("plugins", []),
                        suite=suite, suite_scorers=fill(suite.get("scorers", {})),
                        held_out=(cfg.get("heads") or {}).get("held_out", []),
                        positives=(cfg.get("heads") or {}).get("positives", {}))


@pytest.mark.parametrize("change,message", [
    (lambda c: c["selection"].update(methods=["ratio", "cosine", "ratoi"]),
     "selection.methods ['ratoi']: not scorers (scorers: use-ratio, use-cosine, use-distance, ratio, cosine, distance, "
     "dan-random-ratio; or random, unfiltered)"),
    (lambda c: c["scorers"].update(x={"kind": "ratio", "encoder": "laser"}),
     "scorers.x.encoder: 'laser' is not an encoder (known: dan, dan-random, use, dan-de"),
    (lambda c: c["scorers"].update(x={"kind": "margin-of-error"}),
     "scorers.x: score kind 'margin-of-error' is not registered"),
    (lambda c: c["scorers"].update(x={"kind": "ratio", "params": {"kk": 4}}),
     "scorers.x: kind ratio takes no param(s) ['kk']"),
    (lambda c: c["scorers"].update(random={"kind": "ratio"}), "scorers.random: random and unfiltered are selection"),
    (lambda c: c.update(plugins=["no_such_module_xyz"]), "plugins: cannot import 'no_such_module_xyz'"),
])
def test_scorer_config_errors_name_the_key(change, message: str) -> None:
    with pytest.raises(MarginmineError) as err:
        check_demo(change)
    assert message in str(err.value)


def test_the_workflow_refuses_a_bad_scorer_at_plan_time(tmp_path: Path) -> None:
    """The checks above run when the workflow plans, with the encoders it builds: under quick: true
    the extra encoders (the demo's USE) are not built, without eval_random_init the random-init
    twins are not, so a scorer over one names the key (and why)."""
    def quick(c: dict) -> None:  # the suite's own encoders (USE among them) stay known under quick
        c.update(quick=True)
        c["published"]["encoders"].remove("use")

    r = plan(tmp_path, "config/demo.yaml", quick)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "scorers.use-ratio.encoder: 'use' is not an encoder (known: dan, dan-de" \
        in out and "encoder.extra's encoders are built unless quick: true" in out, out[-2000:]
    r = plan(tmp_path, "config/demo.yaml", lambda c: c["encoder"].update(eval_random_init=False))
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "scorers.dan-random-ratio.encoder: 'dan-random' is not an encoder (known: dan, use" \
        in out and "random-init twins exist unless quick: true" in out, out[-2000:]


def test_the_top_level_seed_reaches_every_seeded_step(tmp_path: Path) -> None:
    """Seed 1234 (the schema's default) and 7 give different random selections, mining pools and
    encoder initialisations; nothing else reads a seed of its own."""
    commands = {}
    for seed in (None, 7):
        copy = tmp_path / f"s{seed}"
        copy.mkdir()
        r = plan(copy, "config/test.yaml", (lambda c, s=seed: c.update(seed=s)) if seed else None, "scoring", "nmt")
        assert r.returncode == 0, r.stderr[-2000:]
        commands[seed] = r.stdout
    for seed, out in ((1234, commands[None]), (7, commands[7])):
        assert re.search(rf"marginmine select [^\n]*--method random [^\n]*--seed {seed} ", out)
        assert re.search(rf"marginmine bucc-data [^\n]*--seed {seed} ", out)
        assert re.search(rf"marginmine train-encoder [^\n]*--seed {seed} ", out)


def test_eq9_and_eq10_rescoring_from_the_definitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Yang et al. (2019) Sec. 6.1: s = phi / margin + phi; Eq. 9's margin averages the k-NN
    similarities of x (among the batch's targets) and of y (among its sources), Eq. 10's is x's
    alone - and Eq. 10 searches once."""
    import marginmine.search.knn as knn_module
    from marginmine.scoring import Batch
    from marginmine.search.margin import unique_groups

    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 16))
    y = x + 0.8 * rng.normal(size=(40, 16))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    src = [f"s{i % 35}" for i in range(40)]  # repeated sentences: neighbour lists hold distinct ones
    tgt = [f"t{i}" for i in range(40)]
    fx, gx = unique_groups(src)
    fy, gy = unique_groups(tgt)
    xu, yu = x[fx].astype(np.float32), y[fy].astype(np.float32)
    k = 4
    cos = np.einsum("ij,ij->i", xu[gx].astype(np.float64), yu[gy].astype(np.float64))
    fwd = np.sort(xu.astype(np.float64) @ yu.T.astype(np.float64), axis=1)[:, -k:].mean(axis=1)[gx]
    bwd = np.sort(yu.astype(np.float64) @ xu.T.astype(np.float64), axis=1)[:, -k:].mean(axis=1)[gy]
    calls = []
    real = knn_module.knn
    monkeypatch.setattr(knn_module, "knn", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    got10 = make_kind("eq10").score(Batch(src, tgt, xu, yu, gx, gy))
    assert len(calls) == 1  # one kNN search: the source side's
    got9 = make_kind("eq9").score(Batch(src, tgt, xu, yu, gx, gy))
    assert np.allclose(got9, cos / ((fwd + bwd) / 2) + cos, atol=1e-5)
    assert np.allclose(got10, cos / fwd + cos, atol=1e-5)
    ratio = make_kind("ratio").score(Batch(src, tgt, xu, yu, gx, gy))
    assert np.allclose(got9, ratio + cos, atol=1e-5)  # Eq. 9 is the ratio margin plus the cosine



def test_eq9_and_eq10_in_the_intrinsic_retrieval_evaluation() -> None:
    """Forward retrieval by the best score among the k nearest neighbours, with hubs in the target
    set (vectors close to every query, no one's translation): Eq. 9 penalises their dense
    neighbourhood as the ratio margin does and retrieves fewer of them than cosine; Eq. 10's margin
    is the query's own neighbourhood, the same for all of a query's candidates, so it ranks them
    exactly as cosine does (it changes scores across queries - thresholds - not retrieval)."""
    from marginmine.encoders.intrinsic import retrieval_error

    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 32))
    y = x + 1.2 * rng.normal(size=(300, 32))
    y = np.vstack([y, x.mean(axis=0)[None, :] * 8 + 0.5 * rng.normal(size=(30, 32))])  # 30 hubs
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    x, y = x.astype(np.float32), y.astype(np.float32)
    errors = {m: retrieval_error(x, y, m, 4) for m in ("absolute", "ratio", "eq9", "eq10")}
    assert errors["eq9"] < errors["absolute"] - 0.02 and errors["ratio"] < errors["absolute"] - 0.02, errors
    assert errors["eq10"] == errors["absolute"], errors


def test_the_intrinsic_report_shows_every_margin_evaluated(tmp_path: Path) -> None:
    """The published scorers' suite evaluates cosine, ratio, eq9 and eq10; the experiment cosine and
    ratio - one Markdown cell per set with every margin an encoder was evaluated under, n/a where it
    was not."""
    import json

    from marginmine.encoders.intrinsic import write_report

    def result(name: str, margins: list[str]) -> Path:
        rows = [{"set": "tatoeba", "margin": m, "pairs": 10, "err_src2tgt": e, "err_tgt2src": e, "err_avg": e}
                for e, m in enumerate(margins, 1)]
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"encoder": name, "rows": rows}))
        return path

    write_report([result("dan", ["cosine", "ratio", "eq9", "eq10"]), result("old", ["cosine", "ratio"])],
                 tmp_path / "i.tsv", tmp_path / "i.md")
    md = (tmp_path / "i.md").read_text()
    assert "| encoder | tatoeba err % (cosine / ratio / eq9 / eq10) |" in md
    assert "| dan | 1.0 / 2.0 / 3.0 / 4.0 |" in md and "| old | 1.0 / 2.0 / n/a / n/a |" in md
    assert len((tmp_path / "i.tsv").read_text().splitlines()) == 1 + 6
    # translate-then-vote's F1 on the same sets (vote-report's intrinsic rows) below, Markdown only
    votes = tmp_path / "votes.tsv"
    rows = [{"set": "tatoeba", "rule": r, "pairs": 10, "found": 8, "precision": p, "recall": 0.5, "f1": f}
            for r, p, f in (("orig", 0.9, 0.643), ("pairwise", 1.0, 0.667))]
    votes.write_text("translators\t{}\n" + "".join(f"intrinsic\t{json.dumps(r)}\n" for r in rows) + "corpus\t{}\n")
    write_report([result("dan", ["cosine", "ratio"])], tmp_path / "v.tsv", tmp_path / "v.md", votes)
    md = (tmp_path / "v.md").read_text()
    assert "| rule | tatoeba F1 (P / R) |" in md and "| vote-orig | 64.3 (90.0 / 50.0) |" in md
    assert "| vote-pairwise | 66.7 (100.0 / 50.0) |" in md
    assert (tmp_path / "v.tsv").read_text() == "".join((tmp_path / "i.tsv").read_text().splitlines(True)[:3])
    votes.write_text("corpus\t{}\n")
    with pytest.raises(InputError, match="holds no intrinsic rows"):
        write_report([result("dan", ["cosine"])], tmp_path / "w.tsv", tmp_path / "w.md", votes)


def test_without_a_cosine_scorer_composition_still_writes_its_density_table(tmp_path: Path) -> None:
    def ratio_only(c: dict) -> None:
        c["scorers"] = {"ratio": {"kind": "ratio"}}
        c["selection"]["methods"] = ["ratio", "random"]
        c["eval"]["extra"]["newstest2014"]["methods"] = ["ratio"]
        c["published"]["baselines"] = ["ratio", "random"]  # the suite's baselines are selection methods
        c["published"]["references"] = [r for r in c["published"].get("references", [])
                                         if r not in ("cosine", "use-cosine")]
        c["published"]["small"]["methods"] = [m for m in c["published"]["small"]["methods"]
                                              if m not in ("cosine", "use-cosine")]

    r = plan(tmp_path, "config/demo.yaml", ratio_only, "demo")
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    cmd = re.search(r"marginmine composition [^\n]*", r.stdout).group(0)
    assert "--density-tsv results/demo/select/density.tsv" in cmd and "--scores" not in cmd


def test_every_planned_marginmine_command_parses(real_data: Path, tmp_path: Path) -> None:
    """Each marginmine call the demo and the paper configs plan is accepted by the CLI's own parser
    (a rule passing two values after a one-value flag stopped a demo run at eval_filter)."""
    import shlex

    from marginmine.cli.main import build_parser

    copy_workflow(tmp_path)
    parser = build_parser()
    seen = set()
    for args, cwd in ((("demo", "--configfile", "config/demo.yaml", "--config", f"data_dir={real_data}"), tmp_path),
                      (("results/bleu_10M.txt",), REPO)):  # the paper's config.yaml, planned where it lives
        r = snakemake("-n", "-p", *args, cwd=cwd)
        assert r.returncode == 0, r.stderr[-2000:]
        for line in r.stdout.splitlines():
            if "marginmine " not in line:
                continue
            line = line[line.index("marginmine "):]
            for part in line.replace("(", " ").replace(")", " ").split("&&"):
                part = part.split(" > ")[0].strip()
                if not part.startswith("marginmine "):
                    continue
                argv = shlex.split(part)[1:]
                try:
                    parser.parse_args(argv)
                except SystemExit:
                    pytest.fail(f"the CLI refuses the planned command: {part}")
                seen.add(argv[0])
    assert {"score", "select", "eval-filter", "eval-mining", "train-encoder", "evaluate", "compare"} <= seen, seen
