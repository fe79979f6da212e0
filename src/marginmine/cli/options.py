"""The options several subcommands share, and the helpers that read them: one place for the pair
filters' flags, the kNN index and device flags, ``--scorers`` and the named encoders behind it,
``--seed`` and ``--allow-empty``. Every command module imports these public names from here; none
imports another command module.

Nothing heavy is imported at module level: building the parser (``marginmine --help``) must not
load torch, numpy or FAISS."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable

from marginmine.cli import values as domain
from marginmine.defaults import (
    BLAS_QUERY_BLOCK,
    INDEX,
    INDEX_KINDS,
    LANGID_MIN_PROB,
    MAX_OVERLAP,
    MAX_RATIO,
    MAX_TOKENS,
    MIN_TOKENS,
    QUERY_BLOCK,
    SEED,
    K,
)
from marginmine.errors import MarginmineError

#: a subcommand's function: the parsed arguments -> exit status
Handler = Callable[[argparse.Namespace], int]
#: what a command module's ``register(sub, handlers)`` fills: command name -> its handler
Handlers = dict[str, Handler]

ALLOW_EMPTY_HELP = "an empty input (an empty shard of split) gives empty outputs instead of an error"
DEVICE_HELP = "cpu or cuda[:N] (fails if no GPU is visible)"


def column_pair(text: str) -> tuple[int, int]:
    """``--columns``: two 0-based column numbers, ``0,1``."""
    try:
        a, b = (int(x) for x in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError("expected two 0-based column numbers like 0,1") from exc
    return a, b


def add_seed(p: argparse.ArgumentParser, help: str, default: int = SEED) -> None:  # noqa: A002 - argparse's word
    """``--seed``: a seed in its domain (default the workflow's seed)."""
    p.add_argument("--seed", type=domain.SEED, default=default, help=help)


def add_device(p: argparse.ArgumentParser, threads_help: str, device_help: str = DEVICE_HELP) -> None:
    """``--device`` (cpu or cuda[:N]) and ``--threads`` (CPU threads; default: the library's choice)."""
    p.add_argument("--device", default="cpu", help=device_help)
    p.add_argument("--threads", type=domain.THREADS, default=None, help=threads_help)


def add_filter_settings(p: argparse.ArgumentParser, protect: bool = True) -> None:
    """The pair filters' flags, shared by ``preprocess`` and ``mine``; defaults are
    :class:`marginmine.preprocess.pipeline.PreprocessSettings`'s, from :mod:`marginmine.defaults` (the
    schema's ``preprocess`` agrees, tested)."""
    d = {"min_tokens": MIN_TOKENS, "max_tokens": MAX_TOKENS, "max_overlap": MAX_OVERLAP, "max_ratio": MAX_RATIO,
         "langid_min_prob": LANGID_MIN_PROB}
    p.add_argument("--src-lang", required=True, help="the source side's language code, e.g. en")
    p.add_argument("--tgt-lang", required=True, help="the target side's language code, e.g. de")
    p.add_argument("--min-tokens", type=domain.Whole(0, 1_000_000), default=d["min_tokens"], help="default %(default)s")
    p.add_argument("--max-tokens", type=domain.Whole(1, 1_000_000), default=d["max_tokens"], help="default %(default)s")
    p.add_argument("--max-overlap", type=domain.PROBABILITY, default=d["max_overlap"],
                   help="drop pairs whose content tokens overlap this much or more (default %(default)s)")
    p.add_argument("--max-ratio", type=domain.Real(1, 1_000_000), default=d["max_ratio"],
                   help="drop pairs with a token length ratio above (default %(default)s)")
    p.add_argument("--langid-min-prob", type=domain.PROBABILITY, default=d["langid_min_prob"],
                   help="fastText probability each side's expected language needs (default %(default)s)")
    p.add_argument("--no-langid", action="store_true", help="skip language identification")
    p.add_argument("--langid-model", default=None,
                   help="language identifier: fasttext (default: the bundled lid.176.ftz), heliport, or a fastText "
                        "model file (lid.176.bin, OpenLID, GlotLID)")
    if protect:
        p.add_argument("--protect", nargs="*", default=[], metavar="FILE",
                       help="dev/test files: pairs with a side found in them are removed (test_set_overlap)")


def torch_threads(n: int | None) -> None:
    """Pin torch's and FAISS' CPU threads to ``n`` (None: their own choice; oversubscribed cores slow
    LSTMs down 4-70x). Neither is imported for it (torch takes 2-4 s on 2 cores, for a command that
    may never need it, e.g. scoring precomputed embeddings): one already loaded is set at once; for
    one loaded later, ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` say ``n`` (their OpenMP reads them at
    load; tests/test_cli_values.py checks both ways). NumPy is loaded first, so that its BLAS keeps
    the threads it always had."""
    if n:
        import numpy  # noqa: F401

        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(n)
        if "faiss" in sys.modules:
            sys.modules["faiss"].omp_set_num_threads(n)
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(n)


def add_knn(p: argparse.ArgumentParser, k: bool = True) -> None:
    """The kNN search's flags (``-k`` unless ``k`` is False: the scorers carry their own), then
    ``--device`` and ``--threads``."""
    if k:
        p.add_argument("-k", "--neighbourhood", dest="k", type=domain.K, default=K,
                       help=f"neighbours per sentence (default {K})")
    p.add_argument("--index", default=INDEX, choices=list(INDEX_KINDS),
                   help=f"kNN index: auto by the database's size (default {INDEX}: exact up to 200k distinct "
                        "sentences), exact flat, ivf-blas, FAISS IVF-Flat, IVF with float16 or 8-bit vectors, "
                        "IVF-PQ (docs/scale.md)")
    p.add_argument("--nlist", type=domain.COUNT0, default=0, help="IVF cells (default 0: about 4 sqrt(database size))")
    p.add_argument("--nprobe", type=domain.COUNT0, default=0,
                   help="IVF cells visited per query (default 0: auto's setting)")
    p.add_argument("--refine", type=domain.COUNT0, default=0,
                   help="search refine x k candidates and re-rank them with exact similarities (0: off)")
    p.add_argument("--query-block", type=domain.COUNT0, default=0,
                   help=f"queries per search block, the unit a killed search resumes from (default 0: "
                        f"{QUERY_BLOCK:,}; {BLAS_QUERY_BLOCK:,} for ivf-blas); the scores depend on it")
    add_device(p, "CPU threads for the encoder and FAISS")


def index_spec(args: argparse.Namespace):  # noqa: ANN201 - IndexSpec, imported lazily
    """The kNN flags of :func:`add_knn` as an :class:`marginmine.search.knn.IndexSpec` (the device checked)."""
    from marginmine.search.knn import IndexSpec, check_device

    check_device(args.device)
    return IndexSpec(kind=args.index, nlist=args.nlist, nprobe=args.nprobe, refine=args.refine, device=args.device,
                     query_block=args.query_block)


def add_scorers(p: argparse.ArgumentParser, default: str | None = "ratio,cosine") -> None:
    """``--scorers`` (None: required), the ``-k`` they default to, and ``--plugin`` modules."""
    p.add_argument("--scorers", default=default, required=default is None,
                   help="the score columns: a JSON object {name: {kind, params...}} (what the workflow passes) "
                        "or a comma list of kinds or name=kind (default %(default)s); kinds: ratio, distance, "
                        "cosine, absolute and those of --plugin modules")
    p.add_argument("-k", "--neighbourhood", dest="k", type=domain.K, default=None,
                   help=f"k of every scorer whose kind has one and whose JSON does not set it "
                        f"(default {K})")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import this module first (it registers score kinds of your own); repeatable")


def scorer_spec(args: argparse.Namespace) -> dict[str, dict]:
    """--scorers as {name: {kind, params}}, -k filled into kinds that take k."""
    from marginmine.scoring import kind_params, load_plugins

    load_plugins(args.plugin)
    text = args.scorers.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MarginmineError(f"--scorers: not valid JSON ({exc})") from exc
        if not isinstance(spec, dict) or not all(isinstance(v, dict) for v in spec.values()):
            raise MarginmineError("--scorers: give a JSON object {name: {\"kind\": ..., params...}}")
    else:
        spec = {}
        for item in filter(None, text.split(",")):
            name, _, kind = item.partition("=")
            spec[name] = {"kind": kind or name}
    if args.k is not None:
        from marginmine.scoring import KINDS

        for entry in spec.values():
            if entry.get("kind") in KINDS and "k" in kind_params(entry["kind"]):
                entry.setdefault("k", args.k)
    return spec


def encoder_dirs(args: argparse.Namespace) -> dict[str, str]:
    """``--encoder NAME=DIR ...`` as {name: directory}."""
    out = {}
    for item in args.encoder or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise MarginmineError(f"--encoder takes NAME=DIR, got {item!r}")
        out[name] = path
    return out


def named_scorers(args: argparse.Namespace, dirs: dict[str, str]) -> dict[str, tuple[str, object]]:
    """--scorers with each scorer's encoder: name -> (encoder name, kind). A scorer without an
    ``encoder`` entry uses the only --encoder given."""
    from marginmine.encoders.base import encoder_identity
    from marginmine.scoring import parse_scorers
    from marginmine.scoring.heads import check_fitted_on

    spec = scorer_spec(args)
    kinds = parse_scorers(spec)
    out = {}
    for name, kind in kinds.items():
        enc = spec[name].get("encoder") or (next(iter(dirs)) if len(dirs) == 1 else None)
        if enc not in dirs:
            raise MarginmineError(f"--scorers {name}: encoder {enc!r} is not among --encoder "
                                  f"({', '.join(dirs) or 'none given'}); give it as --encoder {enc}=DIR")
        if getattr(kind, "fitted", False):  # a head fitted on this encoder, not on another
            check_fitted_on(name, kind, encoder_identity(dirs[enc]), f"--encoder {enc}={dirs[enc]}")
        out[name] = (enc, kind)
    return out


def load_encoders(dirs: dict[str, str], args: argparse.Namespace, used: set[str]) -> dict[str, object]:
    """The encoders of ``dirs`` that a scorer in ``used`` names, loaded on ``--device``."""
    from marginmine.encoders.base import load_encoder

    return {n: load_encoder(d, args.device) for n, d in dirs.items() if n in used}
