# Helpers of rules/score.smk, rules/evaluate.smk and rules/published.smk (after common.smk): scorers and their score
# groups, selections, the scorers' evaluations and the suites.

# --- scorers, selection and the scorers' evaluations ---------------------------------------
# A scorer (config `scorers:`) is a name, an encoder and a score kind registered in the package
# (marginmine.scoring; `plugins:` modules register more). Each encoder a scorer uses is embedded;
# its scorers share one self-describing score file per shard (a header names the columns).

SCORING = config["scoring"]
MINING_EVAL = config.get("mining_eval")
LABELLED_CORPUS = config["corpus"]["source"]["kind"] in BUILT_CORPORA  # its sidecar names every pair's origin
CORPUS_LABELS = f"{WORK}/corpus/{config['corpus']['source']['kind']}.labels.tsv"
FILTER_EVAL = config.get("filter_eval")
PLUGINS = list(config.get("plugins", []))
SCORERS = {name: {**s, "encoder": s.get("encoder", DEFAULT_ENCODER)} for name, s in config["scorers"].items()}
PAPER_SCORERS = {name: {**s, "encoder": s.get("encoder", DEFAULT_ENCODER)} for name, s in PAPERS.get("scorers", {}).items()}
PAPER_METHODS = list(PAPERS.get("methods", []))
PAPER_BASELINES = list(PAPERS.get("baselines", []))
#: further methods the suite's systems are tested against (published_compare_versus), beside the first baseline
PAPER_REFERENCES = list(PAPERS.get("references", []))
ALL_SCORERS = {**SCORERS, **PAPER_SCORERS}


def kind_says(name, attribute, default=False):
    """What a scorer's kind declares about itself (`fitted`, `corpus_negatives`, `mines`): the
    workflow asks the kind, it never knows kinds by name."""
    from marginmine.scoring import KINDS

    return getattr(KINDS[ALL_SCORERS[name]["kind"]], attribute, default)


def is_fitted(name):
    """A scorer whose kind has a head fitted on its positives (heads.positives)."""
    return kind_says(name, "fitted")


def score_group(name):
    """The score files a scorer's column is in: its encoder's (work/<exp>/score/<encoder>/), or for a
    `published:` scorer the suite's own (work/<exp>/score/published/<encoder>/), so the experiment's score
    files never change when the suite is added. A fitted scorer has files of its own
    (.../<encoder>/<name>/): refitting its head rescores nothing else. The scorers that vote over
    translations share files of their own (.../<encoder>/votes/): they wait for the translations,
    no other scorer does, and one job computes the three searches once for all of them."""
    s = ALL_SCORERS[name]
    group = f"published/{s['encoder']}" if name in PAPER_SCORERS else s["encoder"]
    if is_fitted(name):
        return f"{group}/{name}"
    return f"{group}/votes" if kind_says(name, "translated") else group


def group_encoder(group):
    return GROUP_ENCODERS[group]


def head_dir(name):
    return f"{WORK}/heads/{name}"


def head_inputs(names):
    """The fitted heads' manifests of the named scorers (none for most)."""
    return [f"{head_dir(n)}/head.json" for n in names if is_fitted(n)]


HEADS = config.get("heads") or {}


def _fit_corpus(name):
    """(shard, src embeddings, tgt embeddings) of the corpus, for a scorer whose negatives come from it."""
    enc = ALL_SCORERS[name]["encoder"]
    return [(rules.preprocess_shard.output.kept.format(shard=s), rules.embed_shard.output.src.format(encoder=enc, shard=s),
             rules.embed_shard.output.tgt.format(encoder=enc, shard=s)) for s in SHARDS]


def fit_corpus_files(wildcards):
    """The corpus files a fitted scorer's negatives come from (none for most), and the labelled
    evaluation file whose pairs are never negatives."""
    if not kind_says(wildcards.name, "corpus_negatives"):
        return []
    files = [f for triple in _fit_corpus(wildcards.name) for f in triple]
    return files + ([data_path(FILTER_EVAL["paracrawl"])] if FILTER_EVAL and FILTER_EVAL.get("paracrawl") else [])


def fit_corpus_args(wildcards):
    if not kind_says(wildcards.name, "corpus_negatives"):
        return ""
    args = "--corpus " + " ".join(shlex.quote(",".join(t)) for t in _fit_corpus(wildcards.name))
    if FILTER_EVAL and FILTER_EVAL.get("paracrawl"):
        args += f" --exclude-pairs {shlex.quote(data_path(FILTER_EVAL['paracrawl']))}"
    return args


def held_out_files(wildcards=None):
    return [data_path(h[side]) for h in HEADS.get("held_out", []) for side in ("src", "tgt")]


def _file_pair_args(pairs):
    return " ".join(shlex.quote(f"{h['src_lang']},{h['tgt_lang']},{data_path(h['src'])},{data_path(h['tgt'])}")
                    for h in pairs)


def held_out_args(wildcards=None):
    return _file_pair_args(HEADS.get("held_out", []))


def head_positives(name):
    """A fitted scorer's positives: heads.positives (the schema's default: a sample of the encoder
    data), each key of the scorer's own `positives` over it."""
    return {**HEADS.get("positives", {}), **ALL_SCORERS[name].get("positives", {})}


def positives_files(wildcards):
    """The files a fitted scorer's positives come from (positives.from: files), else none."""
    p = head_positives(wildcards.name)
    return [data_path(h[side]) for h in p.get("files", []) for side in ("src", "tgt")] if p.get("from") == "files" else []


def positives_args(wildcards):
    """fit-scorer's --positives options (an unset key: the CLI's default, marginmine.defaults)."""
    p = head_positives(wildcards.name)
    args = [f"--positives {shlex.quote(p['from'])}"] if "from" in p else []
    args += [f"--positives-size {int(p['size'])}"] if "size" in p and p.get("from") != "held_out" else []
    if p.get("from") == "files":
        args.append(f"--positives-files {_file_pair_args(p.get('files', []))}")
    return " ".join(args)


def _check_scorers():
    """Plan-time errors naming the config key (marginmine.scoring.plan): an unknown encoder, kind or
    param, a method that names no scorer, a suite scorer or baseline that does not fit."""
    check_scorer_config(SCORERS, METHODS, list(ENCODER_DIRS), plugins=PLUGINS, suite=PAPERS,
                        suite_scorers=PAPER_SCORERS, held_out=HEADS.get("held_out", []),
                        positives=HEADS.get("positives", {}))


_check_scorers()
# every scorer gets a selection per N; NMT trains selection.methods only
SELECTED = METHODS + [name for name in SCORERS if name not in METHODS]
PAPER_SELECTED = PAPER_METHODS + [name for name in PAPER_SCORERS if name not in PAPER_METHODS]
SCORED_ENCODERS = list(dict.fromkeys(s["encoder"] for s in SCORERS.values()))
ALL_SCORED_ENCODERS = list(dict.fromkeys(s["encoder"] for s in ALL_SCORERS.values()))
ALL_GROUPS = list(dict.fromkeys(score_group(n) for n in ALL_SCORERS))
GROUP_ENCODERS = {score_group(n): s["encoder"] for n, s in ALL_SCORERS.items()}
FITTED = [n for n in ALL_SCORERS if is_fitted(n)]
#: score groups whose scorers vote over translations (rule score_translated, translate.smk)
TRANSLATED_GROUPS = [score_group(n) for n in ALL_SCORERS if kind_says(n, "translated")]

def _check_scale():
    """Plan-time refusals of a run that cannot be meant (N >= the pairs expected after
    preprocessing; a scoring batch above scoring.max_cpu_hours on a CPU), naming the keys, and each
    scored encoder's scoring estimate and shard-size note, printed by every `snakemake -n`
    (marginmine.scoring.plan.check_scale)."""
    from marginmine.scoring.plan import check_scale, planned_dim
    from marginmine.search.knn import IndexSpec

    dims = {}
    for name in ALL_SCORED_ENCODERS:
        model = ENC["models"].get(name) or ENC["models"].get(name.removesuffix("-random"))
        if model is not None:
            dims[name] = planned_dim(model)
    spec = IndexSpec(kind=SCORING["index"], nlist=SCORING["nlist"], nprobe=SCORING["nprobe"],
                     refine=SCORING["refine"], device=SCORING["device"])
    for line in check_scale(expected_pairs=config["corpus"]["expected_pairs"], expected_keep=PRE["expected_keep"],
                            sizes=SIZES,
                            shard_size=SHARD_SIZE, batch_size=SCORING["batch_size"], spec=spec, dims=dims,
                            device=SCORING["device"], max_cpu_hours=SCORING["max_cpu_hours"], k=SCORING["k"]):
        print(line, file=sys.stderr)


_check_scale()

#: what each target's tables hold: the experiment (`demo`, `all` ...), and the published scorers'
#: suite (`published`) with the experiment's baselines (their scorers, selections and systems) beside
SUITES = {
    "main": {"scorers": list(SCORERS), "selected": SELECTED, "methods": METHODS,
             "encoders": EVALUATED_ENCODERS},
    "published": {"scorers": [m for m in PAPER_BASELINES if m in SCORERS] + list(PAPER_SCORERS),
                  "selected": PAPER_BASELINES + PAPER_SELECTED, "methods": PAPER_BASELINES + PAPER_METHODS,
                  "encoders": [DEFAULT_ENCODER, *PAPER_ENCODERS]},
}


def published_margin_args():
    """--margins of the suite's intrinsic evaluation: cosine, ratio, and each margin function a suite
    scorer's kind mines with (Eq. 9 / 10), as the kinds declare (`mines`)."""
    from marginmine.search.margin import MARGINS

    margins = ["absolute", "ratio"]
    for name in SUITES["published"]["scorers"]:
        m = kind_says(name, "mines", None)
        if m in MARGINS and m not in margins:
            margins.append(m)
    return f"--margins {','.join(margins)}"


def similarity_scorers():
    """The suite's selection methods whose kind scores every pair of two sets (`pair_matrix`, e.g.
    mlp): the intrinsic table also retrieves with them (published_eval_similarity)."""
    return [n for n in PAPER_METHODS if n in PAPER_SCORERS and kind_says(n, "pair_matrix", None)]


def pair_intrinsic_set_args(wildcards=None):
    """--set of the intrinsic sets in the experiment's language pair (either orientation)."""
    args = []
    for item in config.get("intrinsic", []):
        if {item["src_lang"], item["tgt_lang"]} == {SRC, TGT}:
            a, b = source_files(f"intrinsic-{item['name']}", item["source"])
            spec = f"{item['name']},{item['kind']},{item['src_lang']},{item['tgt_lang']},{a},{b}"
            args.append(f"--set {shlex.quote(spec)}")
    return " ".join(args)


_unknown_thresholds = [m for m in THRESHOLDS if m not in SCORERS]
if _unknown_thresholds:
    raise ValueError(f"selection.thresholds: {_unknown_thresholds} are not scorers of this config ({', '.join(SCORERS)}): "
                     "a threshold belongs to one scorer's scores")


def suite_groups(suite):
    return list(dict.fromkeys(score_group(n) for n in SUITES[suite]["scorers"]))


def suite_encoders(suite):
    """The encoders a suite's scorers use."""
    return list(dict.fromkeys(ALL_SCORERS[n]["encoder"] for n in SUITES[suite]["scorers"]))


def scorers_json(names):
    """{name: {kind, encoder, params...}} of the named scorers, as the CLI takes it; a fitted
    scorer's head directory is its `head` param."""
    return json.dumps({name: {"kind": ALL_SCORERS[name]["kind"], "encoder": ALL_SCORERS[name]["encoder"],
                              **ALL_SCORERS[name].get("params", {}),
                              **({"head": head_dir(name)} if is_fitted(name) else {})} for name in names})


def group_scorers_json(group):
    return scorers_json([n for n in ALL_SCORERS if score_group(n) == group])


def encoder_json(name):
    return f"{ENCODER_DIRS[name]}/encoder.json"


def encoder_args(names):
    """NAME=DIR of the named encoders, as the evaluation commands take them (--encoder)."""
    return [f"{name}={ENCODER_DIRS[name]}" for name in names]


def scored_encoder_args(suite):
    return encoder_args(suite_encoders(suite))


def score_files(group):
    return expand(rules.score_shard.output.scores, group=group, shard=SHARDS)


def baseline_files(group):
    """The noise baselines written beside score_files(group), same order."""
    return expand(rules.score_shard.output.baseline, group=group, shard=SHARDS)


def select_scores(wildcards):
    return score_files(score_group(wildcards.method)) if wildcards.method in ALL_SCORERS else []


def select_args(wildcards):
    if wildcards.method == "unfiltered":
        return "--method unfiltered"
    if wildcards.N.startswith("t"):  # a selection by threshold (selection.thresholds)
        return f"--method {shlex.quote(wildcards.method)} --threshold {shlex.quote(wildcards.N[1:])}"
    return f"--method {shlex.quote(wildcards.method)} -n {wildcards.N}"


def threshold_selections(outputs):
    """``outputs`` (a rule's output patterns over {method} and {N}) of every selection by threshold
    (selection.thresholds)."""
    return [f for m, ts in THRESHOLDS.items() for t in ts for f in expand(outputs, method=m, N=threshold_label(t))]


def clean_share_inputs(wildcards=None):
    groups = suite_groups("main")
    return {"scores": [f for g in groups for f in score_files(g)],
            "baselines": [f for g in groups for f in baseline_files(g)]}


def clean_share_args(wildcards, input):
    """--scores / --baselines per score group of the main suite, sizes and thresholds."""
    out = []
    for g in suite_groups("main"):
        out += [f"--scores {_quoted(score_files(g))}", f"--baselines {_quoted(baseline_files(g))}"]
    out.append(f"--names {_quoted(SUITES['main']['scorers'])} --sizes {_quoted(SIZES)}")
    if THRESHOLDS:
        pairs = _quoted(f"{m}={','.join(f'{t:g}' for t in ts)}" for m, ts in THRESHOLDS.items())
        out.append(f"--thresholds {pairs}")
    return " ".join(out)


def density_scorers():
    """(margin scorer, its margin, cosine scorer) over one encoder for composition's density section:
    the first scorer among the methods (then the scorers) whose kind mines with a kNN margin that
    composition can recompute (ratio, distance), with a scorer beside it whose kind mines with the
    plain cosine (the kinds declare it: `mines`)."""
    for name in [*METHODS, *SCORERS]:
        margin = kind_says(name, "mines", None) if name in SCORERS else None
        if margin in ("ratio", "distance"):
            for other, t in SCORERS.items():
                if (kind_says(other, "mines", None) == "absolute" and score_group(other) == score_group(name)
                        and t["encoder"] == SCORERS[name]["encoder"]):  # a column of the same score files
                    return name, margin, other
    return None


def _pair_arg(items):
    """SRC,TGT arguments (a list: the shell command quotes each with :q)."""
    return [f"{data_path(p['src'])},{data_path(p['tgt'])}" for p in items]


def mining_eval_files(wildcards=None):
    e = MINING_EVAL
    files = [data_path(p[s]) for p in e["gold_train"] + e["gold_test"] for s in ("src", "tgt")]
    return files + [data_path(p) for p in e["mono_src"] + e["mono_tgt"]]


def filter_eval_inputs(suite):
    def inputs(wildcards=None):
        out = {"encoders": [encoder_json(e) for e in suite_encoders(suite)]}
        heads = head_inputs(SUITES[suite]["scorers"])
        if heads:
            out["heads"] = heads
        if FILTER_EVAL and FILTER_EVAL.get("paracrawl"):
            out["paracrawl"] = data_path(FILTER_EVAL["paracrawl"])
            if suite_votes(suite):
                out["paracrawl_translated"] = text_translations("paracrawl.")
        if LABELLED_CORPUS:
            out["labels"] = CORPUS_LABELS
            out["pairs"] = expand(rules.preprocess_shard.output.kept, shard=SHARDS)
            out["scores"] = [f for g in suite_groups(suite) for f in score_files(g)]
            out["baselines"] = [f for g in suite_groups(suite) for f in baseline_files(g)]
            corpus = negatives_corpus(suite)
            if corpus:
                out["corpus"] = [f for triples in corpus.values() for t in triples for f in t]
        return out

    return inputs


def negatives_corpus(suite):
    """encoder -> the corpus (shard, embeddings) triples of the suite's scorers fitted against corpus
    negatives (mlp): the quality table also scores them without their own negatives."""
    names = [n for n in SUITES[suite]["scorers"] if kind_says(n, "corpus_negatives")]
    return {ALL_SCORERS[n]["encoder"]: _fit_corpus(n) for n in names}


def _quoted(paths):
    return " ".join(shlex.quote(str(p)) for p in paths)


def filter_eval_args(suite):
    """Options with paths, each quoted (the shell command uses them as they are)."""

    def args(wildcards, input):
        out = []
        if "paracrawl" in input.keys():
            out.append(f"--paracrawl {shlex.quote(input.paracrawl)}")
        if "paracrawl_translated" in input.keys():
            out.append(f"--paracrawl-translated {_quoted(input.paracrawl_translated)}")
        if "labels" in input.keys():
            out.append(f"--demo-labels {shlex.quote(input.labels)} --pairs {_quoted(input.pairs)}")
            out += [f"--scores {_quoted(score_files(g))}" for g in suite_groups(suite)]
            out += [f"--baselines {_quoted(baseline_files(g))}" for g in suite_groups(suite)]
            corpus = negatives_corpus(suite)
            if corpus:
                triples = _quoted(f"{e}={','.join(t)}" for e, ts in corpus.items() for t in ts)
                out.append(f"--corpus {triples}")
        return " ".join(out)

    return args


def composition_inputs(suite):
    def inputs(wildcards=None):
        out = {"labels": CORPUS_LABELS,
               "selections": expand(rules.select_top.output.pairs, method=SUITES[suite]["selected"], N=SIZES)}
        if suite == "main" and density_scorers():
            out["pairs"] = expand(rules.preprocess_shard.output.kept, shard=SHARDS)
            out["scores"] = score_files(score_group(density_scorers()[0]))
        return out

    return inputs


def composition_density_args(wildcards, input, output):
    if "scores" not in input.keys():  # no margin + cosine scorer pair over one encoder: an empty table
        return f"--density-tsv {shlex.quote(output.density)}"
    margin, kind, cosine = density_scorers()
    return (f"--pairs {_quoted(input.pairs)} --scores {_quoted(input.scores)} --margin {kind} "
            f"--margin-column {shlex.quote(margin)} --cosine-column {shlex.quote(cosine)} "
            f"--density-tsv {shlex.quote(output.density)}")


def plugin_args(wildcards=None):
    return " ".join(f"--plugin {shlex.quote(m)}" for m in PLUGINS)


def scoring_targets():
    """Selections for every scorer, method and size, and the scorers' evaluations where configured."""
    out = expand(rules.select_top.output.report, method=SELECTED, N=SIZES) + threshold_selections(rules.select_top.output.report)
    out += [rules.clean_share.output.md, rules.clean_share.output.tsv]
    if MINING_EVAL:
        out += rules.eval_mining.output
    if FILTER_EVAL or LABELLED_CORPUS:
        out += rules.eval_filter.output
    if LABELLED_CORPUS:
        out += rules.selection_composition.output
    if shortcut_scorers("main"):
        out += rules.shortcut_check.output
    return out + audit_targets()


def published_targets():
    """What `published` builds: the suite's tables and summary (nothing when the config has no
    `published:`)."""
    if not PAPERS:
        return []
    out = [rules.published_encoder_report.output.md, rules.published_compare.output.md,
           rules.published_summary.output.md]
    if MINING_EVAL:
        out.append(rules.published_eval_mining.output.md)
    if FILTER_EVAL or LABELLED_CORPUS:
        out.append(rules.published_eval_filter.output.md)
    if LABELLED_CORPUS:
        out.append(rules.published_composition.output.md)
    if suite_votes("published"):
        out.append(rules.published_vote_report.output.md)
    if shortcut_scorers():
        out.append(rules.published_shortcut.output.md)
    out.append(rules.published_claims.output.md)
    out += expand(rules.published_compare_versus.output.md, ref=PAPER_REFERENCES)
    return out


def claims_inputs():
    """The tables the claims read (marginmine.report.claim_list), those this config builds."""
    out = [rules.published_encoder_report.output.tsv, rules.published_compare.output.tsv]
    if MINING_EVAL:
        out.append(rules.published_eval_mining.output.tsv)
    if FILTER_EVAL or LABELLED_CORPUS:
        out.append(rules.published_eval_filter.output.tsv)
    if shortcut_scorers():
        out.append(rules.published_shortcut.output.tsv)
    return out + expand(rules.published_compare_versus.output.tsv, ref=PAPER_REFERENCES)


def shortcut_scorers(suite="published"):
    """A suite's fitted scorers the shortcut check reads (none without a clean-mix set to group by origin)."""
    return [n for n in SUITES[suite]["scorers"] if is_fitted(n)] if CLEAN_MIX else []


def shortcut_test_files():
    """The clean-mix set the shortcut check groups by origin: the test split (else the first), src, tgt, labels."""
    split = "test" if "test" in CLEAN_MIX else next(iter(CLEAN_MIX))
    return [f"{CLEAN_MIX_PREFIX}.{split}.{x}" for x in (SRC, TGT, "labels.tsv")]


def shortcut_encoders(suite="published"):
    """The encoders of a suite's fitted scorers (the shortcut check's)."""
    return list(dict.fromkeys(ALL_SCORERS[n]["encoder"] for n in shortcut_scorers(suite)))


# --- the labelled audit (rules/evaluate.smk, docs/choosing-n.md) ---------------------------------------

AUDIT = config["audit"]
#: the audited scorer: audit.scorer, else the first scorer among selection.methods
AUDIT_SCORER = AUDIT["scorer"] or next((m for m in METHODS if m in SCORERS), None)
if AUDIT["scorer"] and AUDIT["scorer"] not in SCORERS:
    raise ValueError(f"audit.scorer: {AUDIT['scorer']!r} is not a scorer of `scorers:` ({', '.join(SCORERS)})")
AUDIT_SIZES = resolve_sizes(AUDIT["sizes"], EXPECTED_KEPT) if AUDIT["sizes"] else SIZES


def audit_targets():
    """The audit's sample and page, and its estimate where there are labels."""
    if AUDIT_SCORER is None:
        return []
    out = list(rules.audit_sample.output)
    if AUDIT["labels_file"] or LABELLED_CORPUS:
        out += list(rules.audit_estimate.output)
    return out
