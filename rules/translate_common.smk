# Helpers of rules/translate.smk (translate-then-vote): which scorers vote, the translators'
# directions and settings, the evaluation texts they translate, and the input functions of the
# rules that use translations (score_translated, eval_mining/eval_filter, published_vote_report).

TRANSLATORS = config["translators"]
TRANSLATED = [n for n in ALL_SCORERS if kind_says(n, "translated")]
DIRECTIONS = [f"{SRC}-{TGT}", f"{TGT}-{SRC}"]
TRANSLATOR_SEED = TRANSLATORS.get("seed", config["seed"])


def translator_model(direction):
    return rules.train_translator.output[0].format(direction=direction, seed=TRANSLATOR_SEED)


def direction_of(lang):
    """The translator that translates text in `lang`."""
    return f"{lang}-{TGT if lang == SRC else SRC}"


def translator_eval(direction, name):
    """(source, reference) of an NMT eval set for a translator (the reverse one reads it backwards)."""
    files = eval_files(name)
    return files if direction == DIRECTIONS[0] else files[::-1]


def translator_params_json(wildcards=None):
    return json.dumps({"arch": NMT["arch"], **NMT.get("params", {}), **TRANSLATORS.get("params", {})}, sort_keys=True)


def _translated_texts():
    """name -> (file, 0-based column or None, language) of each evaluation text a vote scorer needs
    translated: ParaCrawl's labelled pairs and the mining benchmark's pools."""
    out = {}
    if FILTER_EVAL and FILTER_EVAL.get("paracrawl"):
        from marginmine.evaluate.filtereval import PARACRAWL_SIDES

        for side, lang in (("src", SRC), ("tgt", TGT)):
            out[f"paracrawl.{side}"] = (data_path(FILTER_EVAL["paracrawl"]), PARACRAWL_SIDES[side], lang)
    if MINING_EVAL:
        for split in ("train", "test"):
            for side, lang in (("src", SRC), ("tgt", TGT)):
                out[f"mining_eval.{split}.{side}"] = (f"{WORK}/mining_eval/{split}.{side}", None, lang)
    for name, (a, b) in vote_intrinsic_sets().items():
        out[f"intrinsic.{name}.src"] = (a, None, SRC)
        out[f"intrinsic.{name}.tgt"] = (b, None, TGT)
    return out


def vote_intrinsic_sets():
    """name -> (source-language file, target-language file) of the intrinsic sets in the
    experiment's language pair (either orientation in the config)."""
    out = {}
    for item in config.get("intrinsic", []):
        if {item["src_lang"], item["tgt_lang"]} == {SRC, TGT}:
            a, b = source_files(f"intrinsic-{item['name']}", item["source"])
            out[item["name"]] = (a, b) if item["src_lang"] == SRC else (b, a)
    return out


def vote_report_inputs(wildcards=None):
    votes = [n for n in SUITES["published"]["scorers"] if n in TRANSLATED]
    return {"encoder": encoder_json(ALL_SCORERS[votes[0]]["encoder"]),
            "bleu": [rules.evaluate_translator.output.json.format(direction=d) for d in DIRECTIONS],
            "stats": [rules.translate_shard.output.stats.format(direction=d, shard=s) for d in DIRECTIONS for s in SHARDS],
            "scores": [f for n in votes for f in score_files(score_group(n))],
            "intrinsic": text_translations("intrinsic.")}


def vote_report_args(wildcards, input):
    votes = [n for n in SUITES["published"]["scorers"] if n in TRANSLATED]
    args = ["--translator", *(shlex.quote(f"{d}={f}") for d, f in zip(DIRECTIONS, input.bleu))]
    stats = {d: ",".join(rules.translate_shard.output.stats.format(direction=d, shard=s) for s in SHARDS)
             for d in DIRECTIONS}
    args += ["--stats", *(shlex.quote(f"{d}={files}") for d, files in stats.items())]
    args += ["--scores", *(shlex.quote(f"{n}={','.join(score_files(score_group(n)))}") for n in votes)]
    for name, (a, b) in vote_intrinsic_sets().items():
        ta, tb = (rules.translate_text.output.text.format(name=f"intrinsic.{name}.{side}") for side in ("src", "tgt"))
        args.append(f"--set {shlex.quote(f'{name},{a},{b},{ta},{tb}')}")
    return " ".join(args)


TRANSLATED_TEXTS = _translated_texts()


def shard_translation_embeddings(group, shard):
    """The embedded translations of one shard (source side's, target side's) for a score group
    holding a vote scorer; none for the others."""
    if not any(kind_says(n, "translated") for n in ALL_SCORERS if score_group(n) == group):
        return []
    return [rules.embed_translation.output[0].format(encoder=group_encoder(group), shard=shard, direction=d)
            for d in DIRECTIONS]


def translation_args(wildcards, input):
    t = input.translated
    return f"--src-translated {shlex.quote(t[0])} --tgt-translated {shlex.quote(t[1])}" if t else ""


def suite_votes(suite):
    """Whether a suite has a scorer that votes over translations."""
    return any(n in TRANSLATED for n in SUITES[suite]["scorers"])


def text_translations(prefix):
    """The translations of the evaluation texts whose names start with `prefix`, in name order."""
    return [rules.translate_text.output.text.format(name=n) for n in TRANSLATED_TEXTS if n.startswith(prefix)]


def pool_translations(suite):
    """The mining benchmark's pools translated, for a suite with a vote scorer (else none)."""
    return text_translations("mining_eval.") if suite_votes(suite) else []


def pool_translation_args(wildcards, input):
    """--translated SPLIT.SIDE=FILE of the translated pools (rule eval_mining's input `translated`)."""
    if not input.translated:
        return ""
    keys = [n.removeprefix("mining_eval.") for n in TRANSLATED_TEXTS if n.startswith("mining_eval.")]
    pairs = " ".join(shlex.quote(f"{k}={f}") for k, f in zip(keys, input.translated))
    return f"--translated {pairs}"
