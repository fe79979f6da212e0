"""Plan-time checks of the scorers' config (``scorers:``, ``selection.methods``, ``plugins:`` and the
published scorers' suite ``published:``) and of the run's scale, called while the plan is built
(:class:`marginmine.workflow.Plan`, before any job is planned), so a typo fails at once with the
config key that holds it.

Pure Python over the config's dicts: the workflow passes what it knows (which encoders exist), the
package knows the kinds and their params. Tested without Snakemake (tests/test_published.py,
tests/test_scorers.py); one plan per table proves the workflow calls it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from marginmine.defaults import K
from marginmine.errors import MarginmineError
from marginmine.scoring.kinds import BUILTIN_METHODS, load_plugins, make_kind

Scorers = Mapping[str, Mapping[str, Any]]


def check_scorer_config(scorers: Scorers, methods: Sequence[str], encoders: Sequence[str], *,
                        plugins: Sequence[str] = (), suite: Mapping[str, Any] | None = None,
                        suite_scorers: Scorers | None = None, held_out: Sequence[Any] = (),
                        positives: Mapping[str, Any] | None = None) -> None:
    """Refuse, naming the config key: a scorer on an unknown encoder, an unregistered kind or
    param, a method that names no scorer; in the suite (``suite`` = the ``published:`` section,
    ``suite_scorers`` its scorers with their encoders filled in) a scorer name the experiment
    already uses, a method not among its scorers, a baseline that is neither a scorer nor a selection method; a
    fitted scorer (its kind has a head) without ``heads.held_out`` pairs to check it on, ``positives``
    on a kind that is not fitted, positives ``from: files`` (``heads.positives`` = ``positives`` with
    the scorer's own over it) without files.

    ``scorers`` carry their encoder (the default one filled in by the caller); ``encoders`` are the
    encoder names the workflow builds (random-init twins included unless the config turns them off).
    """
    load_plugins(plugins)
    suite = suite or {}
    suite_scorers = suite_scorers or {}
    for key, group in (("scorers", scorers), ("published.scorers", suite_scorers)):
        for name, s in group.items():
            if name in BUILTIN_METHODS:
                raise MarginmineError(f"{key}.{name}: {' and '.join(BUILTIN_METHODS)} are selection methods, "
                                      "not scorer names")
            if key == "published.scorers" and name in scorers:
                raise MarginmineError(f"published.scorers.{name}: also a name in scorers: "
                                      "(a name gives one score column)")
            if s["encoder"] not in encoders:
                twin = (" (random-init twins exist unless quick: true or encoder.eval_random_init: false)"
                        if s["encoder"].endswith("-random")
                        else " (encoder.extra's encoders are built unless quick: true)")
                raise MarginmineError(f"{key}.{name}.encoder: {s['encoder']!r} is not an encoder "
                                      f"(known: {', '.join(encoders)}){twin}")
            kind = make_kind(s["kind"], s.get("params", {}), f"{key}.{name}")
            if getattr(kind, "fitted", False) and not held_out:
                raise MarginmineError(f"{key}.{name}: kind {s['kind']} is checked on held-out pairs; give them as "
                                      "heads.held_out (clean parallel files no encoder trains on, e.g. newstest2019)")
            if "positives" in s and not getattr(kind, "fitted", False):
                raise MarginmineError(f"{key}.{name}.positives: kind {s['kind']} is not fitted, it takes no positives")
            own = {**(positives or {}), **s.get("positives", {})}
            if getattr(kind, "fitted", False) and own.get("from") == "files" and not own.get("files"):
                raise MarginmineError(f"{key}.{name}.positives: from files, but no files are given (positives.files "
                                      "or heads.positives.files)")
    unknown = [m for m in methods if m not in scorers and m not in BUILTIN_METHODS]
    if unknown:
        raise MarginmineError(f"selection.methods {unknown}: not scorers (scorers: {', '.join(scorers)}; "
                              f"or {', '.join(BUILTIN_METHODS)})")
    unknown = [m for m in suite.get("methods", []) if m not in suite_scorers]
    if unknown:
        raise MarginmineError(f"published.methods {unknown}: not published.scorers "
                              f"({', '.join(suite_scorers) or 'none'})")
    baselines = list(suite.get("baselines", []))
    unknown = [m for m in baselines if m not in methods and m not in scorers and m not in BUILTIN_METHODS]
    if unknown:
        raise MarginmineError(f"published.baselines {unknown}: neither scorers nor selection methods "
                              f"({', '.join([*scorers, *BUILTIN_METHODS])}); the suite's tables put their "
                              "systems beside its own (a baseline outside selection.methods is trained by the suite)")
    systems = set(suite.get("methods", [])) | set(baselines)
    unknown = [m for m in suite.get("references", []) if m not in systems]
    if unknown:
        raise MarginmineError(f"published.references {unknown}: not among published.methods or published.baselines "
                              f"({', '.join(sorted(systems))}), whose NMT systems are tested against them")
    if suite and not baselines:
        raise MarginmineError("published.baselines: name at least one scorer or random (the first is "
                              "the comparison's reference, e.g. ratio)")


def check_suite_encoders(suite_encoders: Sequence[str], models: Mapping[str, Any]) -> None:
    """Each of ``published.encoders`` names a key of ``encoder.models`` (how it is built)."""
    for name in suite_encoders:
        if name not in models:
            raise MarginmineError(f"published.encoders: {name!r} is not a key of encoder.models "
                                  f"({', '.join(models)})")


#: the dimension a plan assumes for an encoder that states none (LASER's; an upper bound of the kinds we ship)
ASSUMED_DIM = 1024


def planned_dim(model: Mapping[str, Any]) -> tuple[int, bool]:
    """``(dimension, stated)`` of an ``encoder.models`` entry: ``params.dim``, a reused encoder's
    manifest, else :data:`ASSUMED_DIM` (``stated`` False)."""
    params = model.get("params") or {}
    if isinstance(params.get("dim"), int):
        return params["dim"], True
    if model.get("kind") == "use-multilingual":  # a fixed model (marginmine.encoders.use_multilingual.DIM)
        return 512, True
    if model.get("kind") == "trained" and params.get("path"):
        manifest = Path(str(params["path"])) / "encoder.json"
        try:  # a manifest without its dimension is refused when the encoder is placed, not here
            return int(json.loads(manifest.read_text(encoding="utf-8"))["dim"]), True
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return ASSUMED_DIM, False


def expected_kept(expected_pairs: int, expected_keep: float) -> int:
    """The pairs the preprocessing is expected to keep (``corpus.expected_pairs`` x
    ``preprocess.expected_keep``, half up), at least 1."""
    return max(1, math.floor(expected_pairs * expected_keep + 0.5))


def check_scale(*, expected_pairs: int, expected_keep: float, sizes: Sequence[str], shard_size: int,
                batch_size: int, spec: Any, dims: Mapping[str, tuple[int, bool]], device: str,
                max_cpu_hours: float, k: int = K) -> list[str]:
    """Plan-time refusals of a run that cannot be meant, naming the config keys, and the scoring
    estimate of each scored encoder (lines to print; :mod:`marginmine.search.cost`):

    * ``selection.sizes`` N >= the pairs expected after preprocessing (``corpus.expected_pairs`` x
      ``preprocess.expected_keep``): the selection would keep every pair;
    * a scoring batch estimated above ``scoring.max_cpu_hours`` CPU-hours on a CPU (an exact 5M-pair
      batch is about 120 with a 320-dimensional encoder): approximate search (``scoring.index:
      auto``), smaller batches, or a higher limit if that run is wanted.

    The split deals the pairs to ``ceil(expected_pairs / shard_size)`` shards evenly, so a shard keeps
    about ``expected_pairs / shards x expected_keep`` pairs, and a scoring batch never spans a shard;
    with several shards each keeping less than half of ``scoring.batch_size``, a note says that the
    batches are that small and which shard size gives batches of ``scoring.batch_size`` (the batch
    size changes the scores: docs/scale.md).
    """
    from marginmine.io.sizes import parse_count
    from marginmine.search.cost import job_estimate

    if not 0 < expected_keep <= 1:
        raise MarginmineError(f"preprocess.expected_keep: {expected_keep} is not a share in (0, 1]")
    kept = expected_kept(expected_pairs, expected_keep)
    for size in sizes:
        n = parse_count(str(size))
        if n >= kept:
            of = (f"corpus.expected_pairs ({expected_pairs:,})" if expected_keep == 1 else
                  f"the {kept:,} pairs expected after preprocessing (corpus.expected_pairs {expected_pairs:,} x "
                  f"preprocess.expected_keep {expected_keep:g})")
            raise MarginmineError(f"selection.sizes: {size} ({n:,} pairs) is not below {of}: the selection would "
                                  "keep every pair; choose N below the corpus' size (or correct corpus.expected_pairs"
                                  + (")" if expected_keep == 1 else " or preprocess.expected_keep)"))
    shards = -(-expected_pairs // shard_size)
    shard_pairs = max(1, round(expected_pairs / shards * expected_keep))
    lines = []
    if shards > 1 and shard_pairs < batch_size / 2:
        lines.append(
            f"note: each of the {shards} shards is expected to keep about {shard_pairs:,} pairs "
            f"(corpus.expected_pairs {expected_pairs:,} / {shards} x preprocess.expected_keep {expected_keep:g}) and a "
            f"scoring batch never spans a shard: batches of about {shard_pairs:,}, not scoring.batch_size "
            f"{batch_size:,} (the batch size changes the scores, docs/scale.md); for batches of {batch_size:,}, "
            f"preprocess.shard_size about {round(batch_size / expected_keep):,}")
    try:
        spec.resolved(min(batch_size, shard_pairs))
    except MarginmineError as exc:
        raise MarginmineError(f"scoring.index: {spec.kind} with scoring.device {spec.device}: {exc}") from exc
    for encoder, (dim, stated) in dims.items():
        est = job_estimate(shard_pairs, batch_size, dim, spec, k)
        assumed = "" if stated else f" (dimension not stated: {dim} assumed)"
        where = "on a CPU" if device == "cpu" else f"on a CPU (this run asks for {device}: a GPU takes far less)"
        lines.append(f"scoring estimate, encoder {encoder}{assumed}: {shards} job(s), each {est.describe()} {where}")
        if device == "cpu" and est.cpu_hours_per_batch > max_cpu_hours:
            s = spec.resolved(min(batch_size, shard_pairs))
            raise MarginmineError(
                f"scoring.index: {spec.kind} ({'exact' if s.kind == 'flat' else s.kind}) with scoring.batch_size "
                f"{batch_size:,} (preprocess.shard_size {shard_size:,}, corpus.expected_pairs {expected_pairs:,}), "
                f"encoder {encoder} ({dim} dimensions): about {est.cpu_hours_per_batch:,.0f} CPU-hours per batch, "
                f"above scoring.max_cpu_hours ({max_cpu_hours:g}); use scoring.index: auto (approximate search, "
                "docs/scale.md) or a smaller scoring.batch_size, or raise scoring.max_cpu_hours if this run is wanted")
    return lines


#: where the plan remembers what it read of large files (the SHA-256 of pre-trained files, a fastText
#: model's labels; relative to the working directory: Snakemake's own folder); a file whose size,
#: mtime or inode changed is read again
DIGESTS = Path(".snakemake") / "marginmine" / "sha256.json"


def _remembered(path: Path, what: str, compute: Callable[[Path], Any], cache: Path) -> Any:
    """``compute(path)``, remembered in ``cache`` under ``what`` and the file's real path while its size,
    mtime and inode stay (the plan is built in every job's process too, and a model file is large)."""
    from marginmine.io.safe import write_text

    st = Path(path).stat()
    key, stamp = f"{what}:{os.path.realpath(path)}", [st.st_size, st.st_mtime_ns, st.st_ino]
    try:
        known = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    hit = known.get(key)
    if isinstance(hit, dict) and hit.get("stamp") == stamp and "value" in hit:
        return hit["value"]
    value = compute(path)
    known[key] = {"stamp": stamp, "value": value}
    try:
        write_text(cache, json.dumps(known, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only working directory: computed again next time
    return value


def cached_sha256(path: Path, cache: Path = DIGESTS) -> str:
    """``path``'s SHA-256 (:func:`_remembered`)."""
    from marginmine.io.safe import sha256_file

    return _remembered(path, "sha256", sha256_file, cache)


def cached_labels(path: Path, cache: Path = DIGESTS) -> list[str]:
    """The labels of the fastText model file ``path`` (:func:`_remembered`: not loaded again per job)."""
    from marginmine.preprocess.langid import file_labels

    return _remembered(path, "fasttext-labels", lambda p: file_labels(str(p)), cache)


def check_pretrained(name: str, kind: str, params: Mapping[str, Any], langs_needed: Sequence[str],
                     digest: Callable[[Path], str] = cached_sha256) -> None:
    """``encoder.models.<name>`` of a pre-trained kind, before any job runs: what its import would
    refuse (the kind's ``plan_check``: package, files, pins) and a language the corpus needs that it
    does not embed."""
    from marginmine.encoders import plan_checker

    check = plan_checker(kind)
    if check is None:
        return
    try:
        langs = check(dict(params), digest)
    except MarginmineError as exc:
        raise MarginmineError(f"encoder.models.{name}: {exc}") from exc
    missing = [lang for lang in langs_needed if lang not in langs]
    if missing:
        raise MarginmineError(f"encoder.models.{name}.params.langs: {langs} lacks {', '.join(missing)}, a language "
                              "of the corpus this encoder scores (src_lang/tgt_lang); add it if the model covers it, "
                              "else choose another encoder (docs/encoders.md)")


#: the device keys of a config and the rules whose jobs use that device
DEVICE_RULES = {"encoder.device": ("eval_encoder", "embed_shard", "embed_translation", "published_eval_encoder"),
                "scoring.device": ("score_shard", "score_translated"),
                "nmt.device": ("train_nmt", "evaluate_nmt")}


def profile_gpu_rules(overwrite_resources: Mapping[str, Mapping[str, Any]] | None) -> set[str]:
    """The rules a profile's ``set-resources`` gives a GPU (``gres: gpu:...``, ``gpu``, ``gpus``)."""
    out = set()
    for rule, res in (overwrite_resources or {}).items():
        for key, value in (res or {}).items():
            raw = str(getattr(value, "raw", value))  # Snakemake's Resource keeps the profile's expression
            if key in ("gpu", "gpus") and raw.strip("'\"") not in ("0", "", "None") or key == "gres" and "gpu" in raw:
                out.add(rule)
    return out


#: snakemake options after which it runs no job (it lints, draws, lists, unlocks, reports ...)
NO_JOBS = frozenset({
    "--dry-run", "--dryrun", "--lint", "--rulegraph", "--dag", "--filegraph", "--d3dag", "--unlock", "--list-rules",
    "--list", "--list-target-rules", "--lt", "--summary", "--detailed-summary", "--report", "--touch",
    "--delete-all-output", "--delete-temp-output", "--cleanup-metadata", "--cleanup-shadow", "--list-changes",
    "--lc", "--list-params-changes", "--list-code-changes", "--list-input-changes", "--list-untracked", "--lu",
    "--export-cwl", "--containerize", "--print-compilation", "--archive", "--generate-unit-tests", "--version",
    "--help", "--conda-create-envs-only", "--conda-cleanup-envs", "--conda-cleanup-pkgs", "-l", "-S", "-D", "-t",
    "-h", "-v"})


def executing_from_argv(argv: Sequence[str]) -> bool:
    """Whether a ``snakemake`` command line will run jobs: none of :data:`NO_JOBS` and no ``-n`` (also
    inside a cluster of short flags such as ``-np``). False for anything else: an API call, and the
    snakemake a cluster job runs itself in (``--target-jobs``/``--mode``: the main process checked the
    run, and a CPU node may run the CPU jobs of a GPU run)."""
    program = Path(argv[0]) if argv else Path()
    snakemake = program.name.startswith("snakemake") or program.parent.name == "snakemake"  # or python -m snakemake
    if not snakemake or {"--target-jobs", "--mode"} & set(argv):
        return False
    for a in argv[1:]:
        if a.split("=")[0] in NO_JOBS or a.startswith("-") and not a.startswith("--") and "n" in a[1:]:
            return False
    return True


def gpu_visible() -> bool:
    """Whether this machine shows an NVIDIA GPU (its driver's device file or nvidia-smi), without CUDA."""
    import shutil

    return Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi") is not None


def check_devices(devices: Mapping[str, str], gpu_rules: set[str], gpu_here: bool, executing: bool) -> list[str]:
    """A device key asking for a GPU that neither this machine nor the profile gives its jobs: an
    error when the run executes, a note in a dry run (the paper's config plans anywhere); a profile
    GPU for the rules of a key on the CPU: a note (the GPU would sit idle)."""
    notes = []
    for key, device in devices.items():
        rules = DEVICE_RULES[key]
        given = [r for r in rules if r in gpu_rules]
        missing = [r for r in rules if r not in gpu_rules]
        if device.startswith("cuda") and not gpu_here and missing:
            msg = (f"{key}: {device}, but this machine shows no GPU and the profile gives {', '.join(missing)} "
                   f"none: those jobs would fail at once; run with --profile profiles/slurm-gpu (docs/cluster.md; "
                   f"its set-resources gives each a gres) or set {key}: cpu")
            if executing:
                raise MarginmineError(msg)
            notes.append(f"note: {msg}")
        elif not device.startswith("cuda") and device != "auto" and given:
            notes.append(f"note: the profile gives {', '.join(given)} a GPU, but {key} is {device}: the GPU would "
                         f"sit idle (set {key}: cuda)")
    return notes
