"""The generated reference pages: docs/cli.md from the argument parser (:func:`render_cli`) and
docs/configuration.md from config/schema.yaml (:mod:`.configdoc`).

``make docs`` runs ``python -m marginmine.cli.docs`` (writes both pages); ``--check`` writes nothing
and exits 1 naming each stale page. The text is deterministic: help is formatted at a fixed width,
and no date or absolute path enters it."""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Callable, Sequence

from marginmine.cli.configdoc import prose, render_schema

#: help text is formatted at this width, whatever the terminal
WIDTH = 100

CLI_INTRO = """\
# Command line reference

Use this page to look up a `marginmine` subcommand: what it does, how to call it and the default of
each option. Every workflow stage is a subcommand: the rules in rules/ call them, and each also runs
on its own, without Snakemake (`marginmine <command> --help` prints the same usage).

This page is generated from the argument parser (`build_parser()` in
[src/marginmine/cli/main.py](../src/marginmine/cli/main.py)): do not edit it. Change the help text in
src/marginmine/cli/ and run `make docs`.
"""


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(prog, width=WIDTH, max_help_position=40)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    value = action.default
    if value is None or value is argparse.SUPPRESS or isinstance(value, bool) or value == []:
        return "-"
    if isinstance(value, tuple):  # a typed pair such as --columns 0,1
        return f"`{','.join(map(str, value))}`"
    if isinstance(value, list):
        return f"`{' '.join(map(str, value))}`"
    return f'`{value}`' if value != "" else '`""`'


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _sentence(text: str) -> str:
    """A help line as a sentence: a leading plain word capitalised (not a path or code), a full stop."""
    first = text.split(" ", 1)[0]
    if first.replace("-", "").isalpha() and first[:1].islower():
        text = text[:1].upper() + text[1:]
    return text.rstrip(".") + "."


def _options(parser: argparse.ArgumentParser) -> list[str]:
    fmt = _formatter(parser.prog)
    rows = ["| option | default | description |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = fmt._format_action_invocation(action)
        text = fmt._expand_help(action) if action.help else ""
        rows.append(f"| `{_cell(name)}` | {_default(action)} | {_cell(prose(text))} |")
    return rows


def _usage(parser: argparse.ArgumentParser) -> list[str]:
    """The usage lines; the subcommands' list is shown as COMMAND (they have a table of their own)."""
    fmt = _formatter(parser.prog)
    actions = [copy.copy(a) for a in parser._actions]
    for a in actions:
        if isinstance(a, argparse._SubParsersAction):
            a.metavar = "COMMAND"
    fmt.add_usage(parser.usage, actions, parser._mutually_exclusive_groups)
    return ["```text", fmt.format_help().rstrip(), "```"]


def render_cli(parser: argparse.ArgumentParser | None = None) -> str:
    """docs/cli.md: the global options, a table of the subcommands by group, then each subcommand's
    purpose, usage and options (help text, default)."""
    import importlib

    cli_main = importlib.import_module("marginmine.cli.main")  # the module (the package's `main` is the function)
    parser = parser or cli_main.build_parser()
    sub = _subparsers(parser)
    purpose = {c.dest: c.help or "" for c in sub._choices_actions}
    groups = dict(cli_main.COMMAND_MODULES)  # the module that registers a subcommand -> its group on the page
    grouped: dict[str, list[str]] = {g: [] for g in groups.values()}
    for name in sub.choices:
        module = getattr(cli_main.HANDLERS.get(name), "__module__", "")
        grouped.setdefault(groups.get(module, "Other"), []).append(name)
    doc = (cli_main.__doc__ or "").split("\n\n", 1)
    lines = [CLI_INTRO]
    if len(doc) > 1:
        lines += [" ".join(doc[1].split()).replace("``", "`"), ""]
    lines += ["## Global options", "", *_usage(parser), "", *_options(parser), ""]
    lines += ["## Subcommands", ""]
    for group, names in grouped.items():
        if not names:
            continue
        lines += [f"### {group}", "", "| command | what it does |", "|---|---|"]
        lines += [f"| [{n}](#{n}) | {_cell(prose(purpose[n]))} |" for n in names]
        lines.append("")
    for group, names in grouped.items():
        for name in names:
            p = sub.choices[name]
            lines += [f"## {name}", "", _sentence(_cell(prose(purpose[name]))), "", *_usage(p), ""]
            lines += [*_options(p), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


#: page (relative to the repository) -> its renderer (given the repository root)
PAGES: dict[str, Callable[[Path], str]] = {
    "docs/configuration.md": lambda root: render_schema(root / "config" / "schema.yaml"),
    "docs/cli.md": lambda root: render_cli(),
}


def stale_pages(root: Path) -> list[str]:
    """The generated pages that are missing or differ from a fresh rendering."""
    out = []
    for rel, render in PAGES.items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != render(root):
            out.append(rel)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m marginmine.cli.docs",
                                 description="write (or --check) the generated pages " + ", ".join(PAGES))
    ap.add_argument("--root", default=".", help="the repository (default: the current directory)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is stale")
    args = ap.parse_args(argv)
    root = Path(args.root)
    if args.check:
        stale = stale_pages(root)
        for rel in stale:
            print(f"{rel} is stale: run make docs", file=sys.stderr)
        return 1 if stale else 0
    from marginmine.io.safe import write_text

    for rel, render in PAGES.items():
        path, text = root / rel, render(root)
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            print(f"{rel}: up to date", file=sys.stderr)
            continue
        write_text(path, text)
        print(f"{rel}: written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
