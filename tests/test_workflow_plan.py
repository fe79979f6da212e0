"""The workflow's plan (marginmine.workflow) without Snakemake: a shipped config, its defaults filled from
config/schema.yaml as the workflow's `validate` fills them, read into Plan; what the rules would ask of
it (sizes, shards, seeds, a scoring job's files, the NMT systems, options built from a job's inputs)
and the plan-time refusals, each naming its config key. tests/test_workflow.py plans the same configs
through Snakemake."""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator, validators

from marginmine.errors import MarginmineError
from marginmine.workflow import Plan
from marginmine.workflow.paths import expand, named_options, one_of, repeated, tables

REPO = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())


def _with_defaults(cls):
    """The validator Snakemake's `validate` uses: each property's schema default filled in first."""
    properties = cls.VALIDATORS["properties"]

    def set_defaults(validator, props, instance, schema):
        for name, sub in props.items():
            if "default" in sub and isinstance(instance, dict):
                instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from properties(validator, props, instance, schema)

    return validators.extend(cls, {"properties": set_defaults})


VALIDATOR = _with_defaults(Draft202012Validator)


def config(name: str, real_data: Path, change: Callable[[dict], None] | None = None) -> dict:
    cfg = yaml.safe_load((REPO / name).read_text())
    cfg["data_dir"] = str(real_data)
    if change:
        change(cfg)
    VALIDATOR(SCHEMA).validate(cfg)
    return cfg


def plan(name: str, real_data: Path, change: Callable[[dict], None] | None = None) -> Plan:
    return Plan.from_config(config(name, real_data, change), environ={})


@pytest.fixture(scope="module")
def smoke(real_data: Path) -> Plan:
    """config/test.yaml: two shards, scorers ratio and cosine, a published suite with fitted (cal,
    mlp) and voting (vote, vote-strict) scorers."""
    return plan("config/test.yaml", real_data)


def test_sizes_shards_and_seeds_come_from_the_config(smoke: Plan, real_data: Path) -> None:
    paper = plan("config.yaml", real_data)
    assert paper.n_shards == 14 and paper.shards[0] == "0000" and paper.shards[-1] == "0013"
    assert paper.sizes == ["10M"] and paper.results == "results" and paper.work == "work/paper"
    assert paper.notes[0] == (
        "scoring estimate, encoder laser (dimension not stated: 1024 assumed): 14 job(s), each 1 batch(es) of "
        "<= 4,590,000 pairs, index exact, dim 1024: about 3.3e+02 CPU-hours per batch, 3.3e+02 per job on a CPU "
        "(this run asks for cuda: a GPU takes far less)")
    # the run's cost, stage by stage (marginmine.workflow.estimate): the split over every raw pair in one
    # process, LASER's embedding and exact kNN on GPUs at published rates, what has no cap not counted
    assert paper.notes[1:9] == [
        "cost estimate, split: 49.5 CPU-hours in 1 job(s) (one process over every raw pair)",
        "cost estimate, preprocess: 251 CPU-hours in 14 job(s) (per shard)",
        "cost estimate, embed laser: 17.9 GPU-hours in 14 job(s) (2,000 sentences/s, LASER's published GPU rate)",
        "cost estimate, score laser: 95.9 GPU-hours in 14 job(s) (exact kNN at FAISS' published GPU rate, "
        "dimension not stated: 1024 assumed)",
        "cost estimate, select: 0.175 CPU-hours in 1 job(s) (per method and N)",
        "cost estimate, train encoders: not estimated (no max_minutes: the steps or epochs decide; a cluster job "
        "gets 7 days unless encoder.models.<name>.max_minutes is set)",
        "cost estimate, train NMT: not estimated (no max_minutes: the steps or epochs decide; a cluster job gets "
        "3 days unless nmt.max_minutes is set)",
        "cost estimate, total: 301 CPU-hours and 114 GPU-hours (rates of a 2-core AMD EPYC (AVX2); caps counted "
        "in full); not counted: train encoders, train NMT"]
    assert paper.split_runtime == 5961  # 49.5 hours x 2 + 15 minutes: its own limit, above preprocess' 1440
    # planned without a GPU profile on a machine without a GPU: each GPU device a note (a dry run)
    assert [n.split(":")[1].strip() for n in paper.notes[9:]] == ["encoder.device", "scoring.device", "nmt.device"]
    assert smoke.shards == ["0000", "0001"] and smoke.sizes == ["2k"] and smoke.methods == ["ratio", "random"]
    # nmt.seeds [1, 2], nmt.method_seeds overriding random's and the suite method mlp's
    assert smoke.seeds == {"ratio": (1, 2), "random": (1,), "mlp": (1,)}
    # a share of the pairs expected after preprocessing becomes a count label
    shares = plan("config/test.yaml", real_data, lambda c: c["selection"].update(sizes=["10%", "1k"]))
    assert shares.expected_kept == 8000 * shares.pre["expected_keep"] and shares.sizes == ["800", "1k"]
    # a note goes to the caller's callable as the plan is built (the workflow prints it)
    lines: list[str] = []
    Plan.from_config(config("config/test.yaml", real_data), environ={}, note=lines.append)
    assert lines and all(line.startswith(("scoring estimate, encoder dan", "cost estimate, ")) for line in lines)


def test_data_dir_from_the_environment_when_the_config_names_none(real_data: Path) -> None:
    cfg = config("config/test.yaml", real_data)
    del cfg["data_dir"]
    p = Plan.from_config(cfg, environ={"MARGINMINE_DATA_DIR": str(real_data)})
    # absolute, a symlink kept as the user named it (../shared is often one): the same params either way
    assert p.data_dir == Path(os.path.abspath(real_data))
    assert p.data_path("multi30k/val.en.gz") == str(Path(os.path.abspath(real_data)) / "multi30k/val.en.gz")
    assert p.data_path("/abs/file") == "/abs/file"


def test_a_data_dir_under_home_is_expanded(real_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``~`` in data_dir reads the same directory as its expansion (docs/configuration.md#paths)."""
    monkeypatch.setenv("HOME", str(Path(os.path.abspath(real_data)).parent))
    cfg = config("config/test.yaml", real_data)
    cfg["data_dir"] = f"~/{Path(os.path.abspath(real_data)).name}"
    assert Plan.from_config(cfg, environ={}).data_dir == Path(os.path.abspath(real_data))


@pytest.mark.parametrize("change,message", [
    (lambda c: c["preprocess"].update(min_tokens=90), "preprocess.min_tokens 90 > preprocess.max_tokens 80"),
    (lambda c: c["selection"].update(thresholds={"cosine": [0.5, 0.5]}), "selection.thresholds.cosine"),
    (lambda c: c["selection"].update(thresholds={"nope": [1.0]}), "selection.thresholds: ['nope'] are not scorers"),
    (lambda c: c["selection"].update(methods=["ratoi", "random"]), "selection.methods ['ratoi']"),
    (lambda c: c["selection"].update(sizes=["1M"]), "selection.sizes: 1M"),
    (lambda c: c["nmt"].update(method_seeds={"ratoi": [1]}), "nmt.method_seeds: ['ratoi'] are neither scorers"),
    (lambda c: c["nmt"].update(seeds=[1, 1]), "nmt.seeds"),
    (lambda c: c["nmt"]["params"].update(lr="x"), "nmt.params: NMT param lr must be a number >= 0 (got 'x')"),
    (lambda c: c["nmt"]["params"].update(max_tokens=40.5), "nmt.params: NMT param max_tokens must be a whole"),
    (lambda c: c["translators"]["params"].update(dropout=1.0),
     "translators.params: NMT param dropout must be in [0, 1) (got 1.0)"),
    (lambda c: c.update(audit={"scorer": "nope"}), "audit.scorer: 'nope' is not a scorer"),
    (lambda c: c["encoder"].update(default="nope"), "encoder.default / encoder.extra: ['nope'] not keys"),
    (lambda c: c["corpus"]["source"].update(sample={"size": 5}), "corpus: 'sample' and 'methods' apply to eval sets"),
    (lambda c: c["eval"]["dev"].update(methods=["ratio"]), "eval.dev: every system decodes dev and test"),
    (lambda c: c.update(protect=["no/such/file"]), "protect: 'no/such/file' is neither an eval set"),
    (lambda c: c.update(data_dir="/no/such/dir"), "data_dir: /no/such/dir does not exist"),
    # inputs are read under data_dir (docs/configuration.md, "Paths"): a missing one names its key
    (lambda c: c.update(audit={"labels_file": "my/audit_labels.tsv"}), "audit.labels_file: "),
    (lambda c: c["heads"].update(positives={"from": "files", "files": [{"src_lang": "en", "tgt_lang": "de",
                                                                         "src": "no.en", "tgt": "no.de"}]}),
     "heads.positives: "),
    # a pre-trained encoder's files, pins and languages, as its import would check them
    (lambda c: c["encoder"].update(default="st", models={**c["encoder"]["models"], "st": {
        "kind": "sentence-transformers", "params": {"path": "models/none", "langs": ["en", "de"]}}}),
     "encoder.models.st: sentence-transformers params.path: "),
    (lambda c: c["encoder"].update(default="usem", models={**c["encoder"]["models"], "usem": {
        "kind": "use-multilingual", "params": {"langs": ["en", "fr"]}}}),
     "encoder.models.usem.params.langs: ['en', 'fr'] lacks de, a language of the corpus"),
    (lambda c: c["encoder"].update(default="usem", models={**c["encoder"]["models"], "usem": {
        "kind": "use-multilingual", "params": {"langs": ["en", "xx"]}}}),
     "encoder.models.usem: use-multilingual params.langs: ['xx'] not covered"),
    (lambda c: c["encoder"].update(train=[t for t in c["encoder"]["train"] if "de" not in (t["src_lang"],
                                                                                           t["tgt_lang"])]),
     "encoder.train: no training data in de (the corpus' src_lang/tgt_lang), which encoder.models.dan"),
])
def test_a_config_that_cannot_be_planned_is_refused_with_its_key(change, message: str, real_data: Path) -> None:
    with pytest.raises((ValueError, MarginmineError), match=re.escape(message)):
        plan("config/test.yaml", real_data, change)


def test_an_eval_set_on_an_unknown_clean_mix_split_names_it(real_data: Path) -> None:
    p = plan("config/test.yaml", real_data, lambda c: c["eval"].update(test={"kind": "heldout", "split": "tset"}))
    with pytest.raises(ValueError, match=re.escape("eval-test: heldout split 'tset' is not one of "
                                                   "corpus.source.heldout (dev, test)")):
        p.eval_files("test")


def test_the_files_of_a_scoring_job(smoke: Plan, real_data: Path) -> None:
    groups = {n: smoke.score_group(n) for n in smoke.all_scorers}
    assert groups == {"ratio": "dan", "cosine": "dan", "hn-ratio": "published/dan-hn", "eq9": "published/dan",
                      "eq10": "published/dan", "cal": "published/dan/cal", "mlp": "published/dan/mlp",
                      "vote": "published/dan/votes", "vote-strict": "published/dan/votes"}
    assert smoke.score_files("dan") == ["work/test/score/dan/shard0000.scores.tsv.gz",
                                        "work/test/score/dan/shard0001.scores.tsv.gz"]
    assert smoke.baseline_files("published/dan/cal")[1] == "work/test/score/published/dan/cal/shard0001.baseline.tsv.gz"
    # the rule's output and the plan's readers share one template
    assert smoke.score_files("dan")[0] == smoke.paths.scores.format(group="dan", shard="0000")
    # the vote group waits for both sides' translations, embedded by its encoder; the others for none
    assert smoke.shard_translation_embeddings("published/dan/votes", "0001") == [
        "work/test/embed/dan/shard0001.en-de.npy", "work/test/embed/dan/shard0001.de-en.npy"]
    assert smoke.shard_translation_embeddings("dan", "0001") == []
    assert smoke.head_inputs(smoke.group_scorers("published/dan/mlp")) == ["work/test/heads/mlp/head.json"]
    assert smoke.head_inputs(smoke.group_scorers("dan")) == []
    # the MLP's negatives come from the corpus' shards and their embeddings; ParaCrawl's pairs never are
    mlp = smoke.fit_corpus_files("mlp")
    assert mlp[:3] == ["work/test/preprocess/kept/shard0000.tsv.gz", "work/test/embed/dan/shard0000.en.npy",
                       "work/test/embed/dan/shard0000.de.npy"]
    assert len(mlp) == 7 and mlp[-1].startswith(os.path.abspath(real_data)) and smoke.fit_corpus_files("cal") == []
    assert smoke.translated_groups == ["published/dan/votes", "published/dan/votes"]
    assert smoke.selectable == ["ratio", "random", "cosine", "mlp", "hn-ratio", "eq9", "eq10", "cal", "vote",
                                "vote-strict"]


def test_the_nmt_systems_and_what_each_decodes(smoke: Plan, real_data: Path) -> None:
    assert smoke.nmt_systems() == [("ratio", "2k", 1), ("ratio", "2k", 2), ("random", "2k", 1)]
    assert smoke.nmt_systems(smoke.suites["published"]["methods"])[-1] == ("mlp", "2k", 1)
    assert smoke.default_method == "ratio" and smoke.bleu_targets() == ["results/test/bleu_2k.txt"]
    assert smoke.subset_labels() == {"test": "work/test/corpus/heldout.test.labels.tsv"}
    demo = plan("config/demo.yaml", real_data)
    # newstest2014 is decoded by the scorer-based systems only, Tatoeba and Multi30k by every system
    assert demo.extra_eval_sets("use-ratio") == ["tatoeba", "multi30k-flickr2016", "newstest2014"]
    assert demo.extra_eval_sets("random") == ["tatoeba", "multi30k-flickr2016", "newstest2014"]
    assert demo.extra_eval_sets("hn-ratio") == ["tatoeba", "multi30k-flickr2016"]
    # a set without `methods` is decoded by the suite's systems too, a system of no run by none
    assert demo.extra_eval_sets("eq9")[:2] == ["tatoeba", "multi30k-flickr2016"] and demo.extra_eval_sets("x") == []
    assert demo.extra_eval_args("random").startswith("--extra tatoeba,work/demo/eval/tatoeba.en,")
    assert demo.eval_files("dev") == ["work/demo/corpus/heldout.dev.en", "work/demo/corpus/heldout.dev.de"]
    assert [m for m, _, s in demo.nmt_systems() if s == 1] == ["use-ratio", "use-cosine", "random"]
    # published.small: the MLP, cosine and random also at 5k in the suite's comparison, and USE's MLP
    # and cosine, two seeds each; each decodes newstest2014, the test set of the small-N claims
    small = [r for r in demo.suite_runs("{method}.{N}.{seed}") if ".5k." in r]
    assert small == ["mlp-60.5k.1", "mlp-60.5k.2", "cosine.5k.1", "cosine.5k.2", "random.5k.1", "random.5k.2",
                     "use-mlp-60.5k.1", "use-mlp-60.5k.2", "use-cosine.5k.1", "use-cosine.5k.2"]
    from marginmine.report.claim_list import CLAIMS

    news = {s["method"] for c in CLAIMS if c.measure and c.measure.a.get("N") == "{SMALL}"
            for s in (c.measure.a, c.measure.b)}
    assert news == {"mlp-60", "cosine", "random", "use-mlp-60", "use-cosine"}
    assert all("newstest2014" in demo.extra_eval_sets(m) for m in news), {m: demo.extra_eval_sets(m) for m in news}
    with pytest.raises(ValueError, match=r"published.small.methods: \['eq8'\] are not of published.methods"):
        plan("config/demo.yaml", real_data, lambda c: c["published"]["small"].update(methods=["eq8"]))


def test_options_built_from_a_jobs_inputs(smoke: Plan) -> None:
    assert smoke.select_args("ratio", "t1.05") == "--method ratio --threshold 1.05"
    assert smoke.select_args("ratio", "2k") == "--method ratio -n 2k"
    assert smoke.select_args("unfiltered", "2k") == "--method unfiltered"
    inputs = smoke.filter_eval_inputs("main")
    assert inputs["labels"] == "work/test/corpus/demo.labels.tsv" and len(inputs["pairs"]) == 2
    args = smoke.filter_eval_args("main", inputs)
    assert args.startswith("--paracrawl ") and "--demo-labels work/test/corpus/demo.labels.tsv --pairs " in args
    assert "--scores work/test/score/dan/shard0000.scores.tsv.gz work/test/score/dan/shard0001.scores.tsv.gz" in args
    assert smoke.filter_eval_args("main", {}) == ""
    # the published suite's votes read ParaCrawl translated
    assert smoke.filter_eval_inputs("published")["paracrawl_translated"] == [
        "work/test/translate/texts/paracrawl.src.txt", "work/test/translate/texts/paracrawl.tgt.txt"]
    out = {"density": "d.tsv"}
    assert smoke.composition_density_args({"labels": "l"}, out) == "--density-tsv d.tsv"
    assert smoke.composition_density_args({"pairs": ["p"], "scores": ["s"]}, out) == (
        "--pairs p --scores s --margin ratio --margin-column ratio --cosine-column cosine --density-tsv d.tsv")
    assert smoke.translation_args({"translated": ["a b", "c"]}) == "--src-translated 'a b' --tgt-translated c "


def test_encoder_params_name_other_encoders_by_their_directory(smoke: Plan) -> None:
    params, deps = smoke.encoder_params(smoke.encoder_dirs["dan-hn"])
    assert params["hard_negatives"]["miner"] == "results/test/encoder" and deps == ["results/test/encoder/encoder.json"]
    assert "dan-random" not in smoke.encoder_dirs  # quick: true, no random-init twins


def test_twins_are_planned_for_the_trained_encoders_only(real_data: Path) -> None:
    demo = plan("config/demo.yaml", real_data)
    assert demo.encoder_dirs["dan-random"] == "work/demo/encoders-random/dan" and "use-random" not in demo.encoder_dirs
    assert demo.encoder_budget_arg(demo.encoder_dirs["dan-random"]) == "--untrained"
    assert demo.encoder_model(demo.encoder_dirs["dan-random"]) is demo.enc["models"]["dan"]


def test_the_plan_is_read_only(smoke: Plan) -> None:
    with pytest.raises(AttributeError, match="read-only"):
        smoke.sizes = ["1k"]


def test_expand_varies_the_last_keyword_fastest() -> None:
    assert expand("{a}.{b}", a=[1, 2], b=["x", "y"]) == ["1.x", "1.y", "2.x", "2.y"]
    assert expand("{a}.{b}", a=[1, 2], b="xy") == ["1.xy", "2.xy"]  # a string is one value, as in Snakemake


def test_the_rules_strings_come_from_the_plan(smoke: Plan, real_data: Path) -> None:
    """What the rules once built inline: wildcard constraints, repeated and named options, file lists."""
    assert one_of(["a.b", "c+d"]) == r"a\.b|c\+d" and re.fullmatch(one_of(["a.b"]), "axb") is None
    assert one_of([], empty="(?!)") == "(?!)" and one_of([]) == ""
    assert repeated("--votes", ["a b.tsv", "c.tsv"]) == "--votes 'a b.tsv' --votes c.tsv" and repeated("--x", []) == ""
    assert named_options({"bucc": "b c.tsv", "quality": ""}, ("bucc", "quality")) == "--bucc 'b c.tsv'"
    assert tables(["a.tsv", "b.json", "c.tsv"], but="c.tsv") == ["a.tsv"]
    assert smoke.paths.split_shard.format(shard="0001") == "work/test/preprocess/split/shard0001.tsv.gz"
    template = "r/{method}.{N}.{seed}.json"
    assert smoke.nmt_runs(template) == ["r/ratio.2k.1.json", "r/ratio.2k.2.json", "r/random.2k.1.json"]
    assert smoke.nmt_runs(template, ["mlp"]) == ["r/mlp.2k.1.json"]
    assert smoke.headline_runs(template, "2k") == ["r/ratio.2k.1.json", "r/ratio.2k.2.json"]
    assert smoke.mining_mono("src") == [str(Path(os.path.abspath(real_data)) /
                                            "mono-en-wiki-web/wikitext2.valid+test.sentences.detok.en")]
    assert smoke.audit_thresholds() == [] and smoke.scorers_score_files(["ratio", "cosine"]) == [
        "work/test/score/dan/shard0000.scores.tsv.gz", "work/test/score/dan/shard0001.scores.tsv.gz"]
    demo = plan("config/demo.yaml", real_data, lambda c: c["selection"].update(thresholds={"use-ratio": [1.05]}))
    assert demo.audit_scorer == "use-ratio" and demo.audit_thresholds() == ["1.05"]


def test_the_plan_remembers_a_files_digest_while_it_is_unchanged(tmp_path: Path) -> None:
    from marginmine.io.safe import sha256_file
    from marginmine.workflow.checks import cached_sha256

    f, cache = tmp_path / "model.pt", tmp_path / ".snakemake" / "marginmine" / "sha256.json"
    f.write_bytes(b"weights")
    assert cached_sha256(f, cache) == sha256_file(f) and cache.is_file()
    known = json.loads(cache.read_text())
    entry = known["sha256:" + os.path.realpath(f)]
    entry["value"] = "0" * 64  # what a remembered digest would give for the unchanged file
    cache.write_text(json.dumps(known))
    assert cached_sha256(f, cache) == "0" * 64
    f.write_bytes(b"other weights")  # size and mtime change: read again
    assert cached_sha256(f, cache) == sha256_file(f)


def test_a_gpu_device_needs_a_gpu_from_the_machine_or_the_profile() -> None:
    from marginmine.workflow.checks import check_devices, executing_from_argv, profile_gpu_rules

    class Resource:  # as Snakemake keeps a profile's set-resources value
        def __init__(self, raw: str) -> None:
            self.raw = raw

    gpu = profile_gpu_rules({"embed_shard": {"gres": Resource("'gpu:1'")}, "score_shard": {"mem_mb": 100},
                             "train_nmt": {"gpus": 0}})
    assert gpu == {"embed_shard"}
    devices = {"encoder.device": "cuda", "scoring.device": "cpu", "nmt.device": "auto"}
    with pytest.raises(MarginmineError, match=re.escape("the profile gives eval_encoder, embed_translation, "
                                                        "published_eval_encoder none")):  # embed_shard has one
        check_devices(devices, gpu, gpu_here=False, executing=True)
    every = {"eval_encoder", "embed_shard", "embed_translation", "published_eval_encoder"}
    assert check_devices(devices, every, gpu_here=False, executing=True) == []   # the profile gives each one
    with pytest.raises(MarginmineError, match=re.escape("encoder.device: cuda, but this machine shows no GPU and "
                                                        "the profile gives eval_encoder, embed_shard")):
        check_devices(devices, set(), gpu_here=False, executing=True)
    notes = check_devices(devices, set(), gpu_here=False, executing=False)        # a dry run plans anywhere
    assert len(notes) == 1 and notes[0].startswith("note: encoder.device: cuda, but")
    assert check_devices(devices, set(), gpu_here=True, executing=True) == []     # a local GPU
    idle = check_devices({"encoder.device": "cpu"}, {"embed_shard"}, gpu_here=False, executing=True)
    assert idle == ["note: the profile gives embed_shard a GPU, but encoder.device is cpu: the GPU would sit idle "
                    "(set encoder.device: cuda)"]
    assert executing_from_argv(["/x/.venv/bin/snakemake", "all", "--cores", "2"])
    assert not executing_from_argv(["snakemake", "-np", "all"]) and not executing_from_argv(["snakemake", "--dry-run"])
    assert not executing_from_argv(["python", "-m", "pytest"])
    assert not executing_from_argv(["snakemake", "--lint"]) and not executing_from_argv(["snakemake", "--dag"])
    assert not executing_from_argv(["snakemake", "--target-jobs", "embed_shard:shard=0000", "--mode", "remote"])


def test_a_gpu_stage_gets_the_gpu_twin_of_its_conda_environment(smoke: Plan, real_data: Path) -> None:
    paper = plan("config.yaml", real_data)  # encoder, scoring and nmt on cuda
    assert [paper.conda_env(s) for s in ("encoder", "score", "nmt")] == [
        "../envs/encoder-gpu.yaml", "../envs/score-gpu.yaml", "../envs/nmt-gpu.yaml"]
    assert [smoke.conda_env(s) for s in ("encoder", "score", "nmt")] == [
        "../envs/encoder.yaml", "../envs/score.yaml", "../envs/nmt.yaml"]
    def packages(name: str) -> list[str]:
        env = yaml.safe_load((REPO / "envs" / name).read_text())
        return [*env["dependencies"][:-1], *env["dependencies"][-1]["pip"]]

    for stage in ("encoder", "score", "nmt"):  # the twins pin what the CPU envs pin, faiss-gpu for faiss-cpu
        gpu = ["faiss-cpu==1.15.1" if p.startswith("faiss-gpu") else p for p in packages(f"{stage}-gpu.yaml")]
        assert gpu == packages(f"{stage}.yaml"), stage
