"""The documentation stays true to the repository, without running the workflow:

* the generated pages (docs/configuration.md from config/schema.yaml, docs/cli.md from the argument
  parser) equal a fresh rendering: `make docs` writes them, and a stale page fails naming it;
* every key of config/schema.yaml has a description (the configuration page prints it);
* every relative Markdown link in the hand-written pages resolves: the file (or folder) exists in the
  clone, it is not an output (results/, work/, data/, bench/out/, .venv/ are written by a command and
  absent from a clone: a page names the command instead of linking there), and an anchor into a
  Markdown file names one of its headings (GitHub's heading slugs) or an explicit <a id/name>;
* every repository path cited in code (inline `code` and fenced blocks) exists. A path is a token
  that starts with src/ rules/ config/ tests/ bench/ scripts/ docs/ envs/ profiles/ .ci/, or is a
  top-level file (Makefile, Snakefile, config.yaml, pyproject.toml, requirements*.txt, LICENSE,
  CITATION.cff, CHANGELOG.md, README.md). Tokens under results/, work/, data/, bench/out/ and .venv/
  are outputs and exempt. A token with a placeholder or glob (`<exp>`, `{N}`, `*`, `?`, `[...]`,
  `NNNN`, `...`) is matched as a glob and must match at least one file; a `:line` or `::test` suffix
  and a `#anchor` are ignored.

The pages checked are README.md, docs/*.md, bench/RESULTS.md, CHANGELOG.md and config/README.md:
whichever of them exist. CHANGELOG.md is history: its links must resolve, but the paths it cites in
code may be the old names of renamed or removed files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from marginmine.cli.configdoc import schema_keys
from marginmine.cli.docs import PAGES

REPO = Path(__file__).resolve().parents[1]
OUTPUTS = ("results/", "work/", "data/", "bench/out/", ".venv/")
PREFIXES = ("src/", "rules/", "config/", "tests/", "bench/", "scripts/", "docs/", "envs/", "profiles/", ".ci/")
TOP_FILES = ("Makefile", "Snakefile", "config.yaml", "pyproject.toml", "requirements*.txt", "LICENSE",
             "CITATION.cff", "CHANGELOG.md", "README.md")


def checked_pages() -> list[Path]:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "bench" / "RESULTS.md",
             REPO / "CHANGELOG.md", REPO / "config" / "README.md"]
    return [p for p in pages if p.is_file()]


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


# --- generated pages --------------------------------------------------------------------------

@pytest.mark.parametrize("page", list(PAGES))
def test_a_generated_page_equals_a_fresh_rendering(page: str) -> None:
    path = REPO / page
    fresh = PAGES[page](REPO)
    if not path.is_file():
        pytest.fail(f"{page} is missing: run make docs", pytrace=False)
    old = path.read_text(encoding="utf-8")
    if old != fresh:
        line = next((i for i, (a, b) in enumerate(zip(old.splitlines(), fresh.splitlines()), 1) if a != b),
                    min(len(old.splitlines()), len(fresh.splitlines())) + 1)
        pytest.fail(f"{page} is stale: run make docs (first difference at line {line})", pytrace=False)


def test_every_schema_key_has_a_description() -> None:
    keys = schema_keys(REPO / "config" / "schema.yaml")
    assert len(keys) > 100
    missing = [k.path for k in keys if not k.description]
    assert not missing, f"config/schema.yaml: keys without a description: {', '.join(missing)}"


def test_the_pages_carry_no_absolute_path_or_date() -> None:
    for page in PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        assert str(REPO) not in text and not re.search(r"\b20\d\d-\d\d-\d\d\b", text), page


# --- links and cited paths ---------------------------------------------------------------------

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.S | re.M)
CODE = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)


def _prose_and_code(text: str) -> tuple[str, list[str]]:
    """The text without its code (for links), and the code: fenced blocks and inline spans."""
    code = [m.group(0) for m in FENCE.finditer(text)]
    rest = FENCE.sub("", text)
    code += [m.group(2) for m in CODE.finditer(rest)]
    return CODE.sub("", rest), code


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: the rendered text lower-cased, punctuation dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    out |= set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return out


def link_problem(page: Path, target: str) -> str | None:
    if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
        return None
    path_part, _, anchor = target.partition("#")
    dest = (page.parent / path_part).resolve() if path_part else page
    try:
        rel = dest.relative_to(REPO).as_posix()
    except ValueError:
        return f"points outside the repository ({target})"
    if any((rel + "/").startswith(o) for o in OUTPUTS):
        return f"links to an output ({rel}), absent from a clone: name the command that writes it"
    if not dest.exists():
        return f"no such file: {rel}"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"no heading #{anchor} in {rel}"
    return None


def test_every_relative_link_resolves() -> None:
    problems = []
    for page in checked_pages():
        prose, _ = _prose_and_code(page.read_text(encoding="utf-8"))
        targets = [m.group(1) for m in LINK.finditer(prose)] + [m.group(1) for m in REF_LINK.finditer(prose)]
        problems += [f"{_rel(page)}: link ({t}): {p}" for t in targets if (p := link_problem(page, t))]
    assert not problems, "\n".join(problems)


GLOB_PARTS = re.compile(r"<[^<>\s]*>|\{[^{}\s]*\}|\.\.\.|N{3,}")


def cited_paths(code: str) -> list[str]:
    """Repository paths in a piece of code (see the module's docstring for the rule)."""
    out = []
    for token in re.split(r"[\s\"'(),;=|\\`]+", code):
        token = token.split("::", 1)[0].split("#", 1)[0]
        token = re.sub(r":[\w.-]*$", "", token).removeprefix("./").lstrip("[").rstrip(".,:")
        if token.endswith("]") and "[" not in token:  # `make dag [DAG_CONFIG=config/demo.yaml]`
            token = token[:-1]
        if not token or token.startswith(OUTPUTS):
            continue
        if token.startswith(PREFIXES) or any(Path(token).match(name) and "/" not in token for name in TOP_FILES):
            out.append(token)
    return out


def path_exists(token: str) -> bool:
    pattern = GLOB_PARTS.sub("*", token)
    if any(c in pattern for c in "*?["):
        return any(REPO.glob(pattern.rstrip("/")))
    return (REPO / token).exists()


def test_every_cited_repository_path_exists() -> None:
    problems = []
    for page in checked_pages():
        if page == REPO / "CHANGELOG.md":
            continue
        _, code = _prose_and_code(page.read_text(encoding="utf-8"))
        missing = sorted({t for piece in code for t in cited_paths(piece) if not path_exists(t)})
        problems += [f"{_rel(page)}: `{t}` does not exist in the repository" for t in missing]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("code, paths", [
    ("make docs writes docs/cli.md", ["docs/cli.md"]),
    ("results/<exp>/comparison.md work/demo/x bench/out/y .venv/bin/python data/z", []),
    ("snakemake --configfile=config/demo.yaml -n", ["config/demo.yaml"]),
    ("src/marginmine/cli/main.py:42 tests/test_docs.py::test_x", ["src/marginmine/cli/main.py", "tests/test_docs.py"]),
    ("pip install -r requirements-nodeps.txt; cat Makefile", ["requirements-nodeps.txt", "Makefile"]),
    ("../shared/data /abs/src/x marginmine.cli", []),
    ("make dag [DAG_CONFIG=config/demo.yaml]", ["config/demo.yaml"]),
])
def test_what_counts_as_a_cited_path(code: str, paths: list[str]) -> None:
    assert cited_paths(code) == paths


def test_placeholders_and_globs_match_files_and_typos_do_not() -> None:
    assert path_exists("rules/*.smk") and path_exists("config/<name>.yaml") and path_exists("src/marginmine/")
    assert path_exists("requirements*.txt") and path_exists("src/marginmine/cli/...")
    assert not path_exists("rule/*.smk") and not path_exists("config/demo.yml")
    assert slug("`scoring.k` and (more)") == "scoringk-and-more" and slug("Top-level keys") == "top-level-keys"


def test_the_readme_stays_short() -> None:
    """The README is the newcomer's page: at most 200 lines with its rendered blocks filled (the
    reference lives in docs/)."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail to a docs/ page"
