"""``marginmine`` command line: one subcommand per workflow stage, usable without Snakemake.

Errors in the input are reported as one line naming the file (and line) and what to do,
with exit status 2; no traceback unless ``--debug``. So is a value out of its option's range (every
number has one: 0 threads, nan, a word where a count belongs are refused as the arguments are read).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Sequence

from marginmine.cli import values as domain
from marginmine.cli.options import Handler, Handlers
from marginmine.errors import MarginmineError, NotImplementedYet

log = logging.getLogger("marginmine")

#: Every module that defines subcommands, once, in the order of ``marginmine --help``, with the group
#: docs/cli.md lists its commands under. Each has ``register(sub, handlers)``, which adds its own
#: commands and nothing else; the options they share are :mod:`marginmine.cli.options`.
COMMAND_MODULES: tuple[tuple[str, str], ...] = (
    ("marginmine.cli.preprocess", "Data and preprocessing"),
    ("marginmine.cli.data", "Data and preprocessing"),
    ("marginmine.cli.encoders", "Encoders"),
    ("marginmine.cli.score", "Scoring, mining and selection"),
    ("marginmine.cli.score_eval", "Evaluations of the scorers"),
    ("marginmine.cli.eval_filter", "Evaluations of the scorers"),
    ("marginmine.cli.cleanshare", "Evaluations of the scorers"),
    ("marginmine.cli.shortcut", "Evaluations of the scorers"),
    ("marginmine.cli.audit", "Evaluations of the scorers"),
    ("marginmine.cli.nmt", "NMT and translation"),
    ("marginmine.cli.report", "Reports"),
    ("marginmine.cli.samples", "Reports"),
)

#: command name -> its handler; :func:`build_parser` fills it
HANDLERS: Handlers = {}


def _not_implemented(stage: str, issue: int) -> Handler:
    def run(args: argparse.Namespace) -> int:
        raise NotImplementedYet(f"'{stage}' is not implemented yet (planned in issue #{issue})")
    return run


PLANNED: dict[str, int] = {}  # stage -> issue; a placeholder subcommand fails with "not implemented yet"


def build_parser() -> argparse.ArgumentParser:
    """The ``marginmine`` parser: the global options, then the subcommands of every module of
    :data:`COMMAND_MODULES` in order (their handlers go to :data:`HANDLERS`), then the planned ones."""
    ap = domain.OneLineParser(prog="marginmine", description=__doc__.splitlines()[0])
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    ap.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    sub = ap.add_subparsers(dest="command", required=True)
    for module, _group in COMMAND_MODULES:
        importlib.import_module(module).register(sub, HANDLERS)
    for stage, issue in PLANNED.items():
        p = sub.add_parser(stage, help=f"(not implemented yet: issue #{issue})")
        p.add_argument("rest", nargs=argparse.REMAINDER)
        HANDLERS[stage] = _not_implemented(stage, issue)
    return ap


def check_outputs(command: str, args: argparse.Namespace) -> None:
    """Refuse, before any work, an output that would overwrite an input or another output."""
    from marginmine.cli.paths import PATHS, roles
    from marginmine.io.safe import check_paths

    if command in PATHS:
        ins, outs = roles(command, args)
        check_paths(ins, outs)


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (its lines joined by "; "), or its type's name if it has none."""
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand: exit status 0, or 2 with one error line (``marginmine CMD: error: ...``)
    for a refused argument, a bad input (:class:`MarginmineError`) or a value a validated setting
    refuses (``ValueError``, also from a settings class a handler builds); ``--debug`` re-raises."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s", stream=sys.stderr)
    try:
        check_outputs(args.command, args)
        return HANDLERS[args.command](args)
    except MarginmineError as exc:
        if args.debug:
            raise
        print(f"marginmine {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a validated setting (a frozen settings class, a kind's params) refused a value
        if args.debug:
            raise
        print(f"marginmine {args.command}: error: {one_line(exc)} (--debug shows where)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"marginmine {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
