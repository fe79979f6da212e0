# Helpers of rules/encoder.smk (after common.smk): which encoders are trained, embedded and
# evaluated, their directories and arguments.

# --- encoders ---------------------------------------------------------------------------

ENC = config["encoder"]
QUICK = config["quick"]
DEFAULT_ENCODER = ENC["default"]
DEFAULT_ENCODER_DIR = f"{RESULTS}/encoder"
_EXTRA = [] if QUICK else list(ENC["extra"])
_UNKNOWN = [n for n in [DEFAULT_ENCODER, *ENC["extra"]] if n not in ENC["models"]]
if _UNKNOWN:
    raise ValueError(f"encoder.default / encoder.extra: {_UNKNOWN} not keys of encoder.models "
                     f"({', '.join(ENC['models'])})")
ENCODER_DIRS = {DEFAULT_ENCODER: DEFAULT_ENCODER_DIR}
ENCODER_DIRS.update({n: f"{RESULTS}/encoders/{n}" for n in _EXTRA})
if ENC["eval_random_init"] and not QUICK:  # twins of the trained kinds (a pre-trained import has none)
    ENCODER_DIRS.update({f"{n}-random": f"{WORK}/encoders-random/{n}" for n in [DEFAULT_ENCODER, *_EXTRA]
                         if ENC["models"][n]["kind"] not in ENCODER_TWINLESS})
EVALUATED_ENCODERS = list(ENCODER_DIRS)
# the published scorers' suite (`published:`, target `published`): its own encoders, scorers and NMT
# methods, written beside the experiment's, never into its files (after `published`, the experiment's
# target has nothing to do)
PAPERS = config.get("published") or {}
PAPER_ENCODERS = list(PAPERS.get("encoders", []))
check_suite_encoders(PAPER_ENCODERS, ENC["models"])
for _name in PAPER_ENCODERS:
    ENCODER_DIRS.setdefault(_name, f"{RESULTS}/encoders/{_name}")
_NAME_OF_DIR = {d: n for n, d in ENCODER_DIRS.items()}


def encoder_name(encdir):
    return _NAME_OF_DIR[encdir]


def is_twin(encdir):
    """A random-init twin: the same network and subwords as its encoder, built untrained by the
    encoder's own trainer (train-encoder --untrained)."""
    name = encoder_name(encdir)
    return name.endswith("-random") and name not in ENC["models"]


def encoder_model(encdir):
    """The models: entry of an encoder directory (a twin's is its encoder's)."""
    name = encoder_name(encdir)
    return ENC["models"][name.removesuffix("-random") if is_twin(encdir) else name]


def _model_downloads():
    """Encoder params given as {url, sha256} (e.g. a released LASER2 checkpoint): fetched by the
    download rule into data/downloads/, the param replaced by the file and its digest pinned."""
    out = {}
    for name, model in ENC["models"].items():
        for key, value in (model.get("params") or {}).items():
            if isinstance(value, dict) and "url" in value:
                if not value.get("sha256"):
                    raise ValueError(
                        f"encoder.models.{name}.params.{key}: a url needs its sha256 (pre-trained files "
                        "are loaded only when the config pins their digest)"
                    )
                out[f"encoder-{name}-{key}"] = {"url": value["url"], "sha256": value["sha256"], "model": name, "key": key}
    return out


MODEL_DOWNLOADS = _model_downloads()
URL_SOURCES.update(MODEL_DOWNLOADS)


def _encoder_refs(value, where):
    """{encoder: NAME} anywhere in an encoder's params (e.g. the model that mines its hard
    negatives): replaced by that encoder's directory, which the training then waits for."""
    if isinstance(value, dict) and set(value) == {"encoder"}:
        name = value["encoder"]
        if name not in ENCODER_DIRS:
            raise ValueError(f"{where}: unknown encoder {name!r} (encoders: {', '.join(ENCODER_DIRS)})")
        return ENCODER_DIRS[name], [f"{ENCODER_DIRS[name]}/encoder.json"]
    if isinstance(value, dict):
        out, deps = {}, []
        for k, v in value.items():
            out[k], d = _encoder_refs(v, f"{where}.{k}")
            deps += d
        return out, deps
    return value, []


def encoder_params(encdir):
    """An encoder's params as its training reads them, and the files that training needs besides its
    data: other encoders named by {encoder: NAME} become their directories (their encoder.json a
    dependency), files given by {url, sha256} their downloads (digest pinned)."""
    model = encoder_model(encdir)
    params, deps = _encoder_refs(model.get("params", {}), f"encoder.models.{encoder_name(encdir)}.params")
    for source, item in MODEL_DOWNLOADS.items():
        if ENC["models"][item["model"]] is model:
            params[item["key"]] = download_path(source)
            params.setdefault("sha256", {})[item["key"]] = item["sha256"]
            deps.append(download_path(source))
    if model["kind"] == "trained" and params.get("path"):  # reused from another experiment: its manifest
        deps.append(f"{params['path']}/encoder.json")
    return params, deps


def encoder_params_json(encdir):
    return json.dumps(encoder_params(encdir)[0], sort_keys=True)


def encoder_downloads(encdir):
    return encoder_params(encdir)[1]


def encoder_budget_arg(encdir):
    """--max-minutes of a trained encoder; a twin is built untrained, without a budget."""
    if is_twin(encdir):
        return "--untrained"
    model = encoder_model(encdir)
    minutes = model.get("max_minutes")
    return f"--max-minutes {minutes} --on-time-cap {model['on_time_cap']}" if minutes else ""


def encoder_runtime(encdir):
    minutes = None if is_twin(encdir) else encoder_model(encdir).get("max_minutes")
    return int(minutes * 1.5 + 15) if minutes else 7 * 24 * 60


def encoder_train_files(wildcards=None):
    files = []
    for item in ENC["train"]:
        files += source_files(f"encoder-{item['name']}", item["source"])
    return files


def encoder_sources_json():
    items = [
        {
            "name": item["name"],
            "src_lang": item["src_lang"],
            "tgt_lang": item["tgt_lang"],
            "files": source_files(f"encoder-{item['name']}", item["source"]),
            "columns": item["source"]["columns"],
            "detokenize": item.get("detokenize"),
        }
        for item in ENC["train"]
    ]
    return json.dumps(items)


def intrinsic_files(wildcards=None):
    files = []
    for item in config.get("intrinsic", []):
        files += source_files(f"intrinsic-{item['name']}", item["source"])
    return files


def intrinsic_set_args(wildcards=None):
    args = []
    for item in config.get("intrinsic", []):
        a, b = source_files(f"intrinsic-{item['name']}", item["source"])
        spec = f"{item['name']},{item['kind']},{item['src_lang']},{item['tgt_lang']},{a},{b}"
        args.append(f"--set {shlex.quote(spec)}")
    return " ".join(args)


def encoder_protect_files(wildcards=None):
    """Dev/test sets and the intrinsic-evaluation sets never enter encoder training."""
    return sorted(set(protect_files() + intrinsic_files()))


def encoder_excluded_corpus(wildcards=None):
    return corpus_files() if ENC["exclude_corpus"] else []
