# Helpers of rules/nmt.smk (after score_common.smk): NMT settings, training seeds per method,
# the comparison's inputs.

# --- NMT ----------------------------------------------------------------------------------

NMT = config["nmt"]
DEFAULT_METHOD = METHODS[0]
EXTRA_EVAL = list(config["eval"].get("extra", {}))


def _method_seeds():
    """Training seeds per selection method (nmt.seeds, nmt.method_seeds overriding), validated."""
    from marginmine.nmt.significance import validate_seeds

    default = validate_seeds(NMT["seeds"], "nmt.seeds")
    overrides = NMT.get("method_seeds", {})
    known = [*ALL_SCORERS, "random", "unfiltered"]  # an entry for a method not trained now is harmless
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ValueError(f"nmt.method_seeds: {unknown} are neither scorers nor random/unfiltered ({', '.join(known)})")
    return {m: validate_seeds(overrides[m], f"nmt.method_seeds.{m}") if m in overrides else default
            for m in dict.fromkeys(METHODS + PAPER_BASELINES + PAPER_METHODS)}


SEEDS = _method_seeds()


def nmt_systems(methods=None):
    """(method, N, seed) of every NMT system to train."""
    return [(m, n, s) for m in (methods or METHODS) for n in SIZES for s in SEEDS[m]]


def nmt_params_json(wildcards=None):
    return json.dumps({"arch": NMT["arch"], **NMT.get("params", {})}, sort_keys=True)


def nmt_budget_arg(wildcards=None):
    minutes = NMT.get("max_minutes")
    return f"--max-minutes {minutes} --on-time-cap {NMT['on_time_cap']}" if minutes else ""


def nmt_runtime(wildcards=None):
    minutes = NMT.get("max_minutes")
    return int(minutes * 1.5 + 15) if minutes else 3 * 24 * 60


def extra_eval_sets(wildcards):
    """The extra test sets this method's system decodes (an extra set's `methods`, default every system:
    the experiment's, the suite's baselines and methods)."""
    every = METHODS + PAPER_BASELINES + PAPER_METHODS
    return [n for n in EXTRA_EVAL if wildcards.method in EVAL_SETS[n].get("methods", every)]


def extra_eval_files(wildcards):
    return [f for name in extra_eval_sets(wildcards) for f in eval_files(name)]


def extra_eval_args(wildcards):
    args = [f"{name},{','.join(eval_files(name))}" for name in extra_eval_sets(wildcards)]
    return f"--extra {_quoted(args)}" if args else ""


def _labels_of(name):
    src = EVAL_SETS[name]
    if src["kind"] == "heldout":
        return f"{CLEAN_MIX_PREFIX}.{src['split']}.labels.tsv"
    return None


def subset_labels():
    """Test sets held out from the labelled corpus, with their labels (BLEU per clean origin; dev is
    not a test set)."""
    return {name: _labels_of(name) for name in EVAL_SETS if name != "dev" and _labels_of(name)}


def subset_args(wildcards=None):
    args = [f"{name}={path}" for name, path in subset_labels().items()]
    return f"--subsets {_quoted(args)}" if args else ""


def nmt_targets():
    """The headline BLEU files and the method comparison."""
    return bleu_targets() + [f"{RESULTS}/comparison.tsv"]


def bleu_targets():
    return [f"{RESULTS}/bleu_{n}.txt" for n in SIZES]
