"""docs/configuration.md from config/schema.yaml: every key with its dotted path, its type, its default
and its description. Pure: the schema file in, the Markdown text out (``make docs`` writes it,
tests/test_docs.py checks the page is fresh and that every key has a description)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the definition documented once, in its own section, wherever a key refers to it
SOURCE = "path_or_url_source"

INTRO = """\
# Configuration reference

Use this page to look up any key of an experiment's configuration file: what it does, the values it
accepts and its default. An experiment is one YAML file: config.yaml (the paper's experiment, read when
no `--configfile` is given) or a file passed with `--configfile` (config/demo.yaml, config/test.yaml,
config/own-corpus.yaml). Snakemake checks it against [config/schema.yaml](../config/schema.yaml) before
it plans any job, and fills in the defaults of the keys left out.

This page is generated from config/schema.yaml: do not edit it. Change a key's `description:` in the
schema and run `make docs`.

How to read the tables:

- a key is written with its full dotted path: `scoring.k` is the key `k` inside `scoring`;
- `a[].b` is the key `b` of each item of the list `a`; `a.<name>.b` is the key `b` of each entry of the
  map `a`, whose entry names you choose;
- default "required": the key must be set; "-": optional, with no default (the description says what
  its absence means);
- "source" is a corpus or test-set source, described in [Sources](#sources).

## Paths

One rule for every path a config names:

- **an input you supply** - the corpus and any local source, `protect` files, the mining benchmark's
  files, `filter_eval.paracrawl`, the `heads` and scorers' positives and held-out pairs,
  `audit.labels_file`, and a pre-trained encoder's files (`laser-pretrained`: `model`, `spm`,
  `cvocab`, also under `lang_models`; `sentence-transformers`: `path`) - is read under `data_dir`
  when relative; an absolute path (or one starting with `~`) is used as it is. A symlink is followed,
  never resolved into the path. A missing input fails `snakemake -n`, naming its key;
- **what the workflow writes** (`results_dir`, `work/`) and the encoder directory of another
  experiment reused with `kind: trained` (`params.path`, e.g. `results/demo/encoder`) are relative to
  the directory Snakemake runs in (the repository);
- `data_dir` itself, when relative, is relative to that directory too.
"""


@dataclass(frozen=True)
class Key:
    """One documented key: its dotted path, its schema node ($ref resolved) and whether it is required."""

    path: str
    node: dict
    required: bool

    @property
    def description(self) -> str:
        return " ".join(str(self.node.get("description", "")).split())


def _load(schema_path: str | Path) -> dict:
    import yaml

    return yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))


def _resolve(node: Any, defs: dict) -> dict:
    """A $ref merged with its siblings (a sibling description wins); ``_ref`` keeps the definition's name."""
    if not isinstance(node, dict) or "$ref" not in node:
        return node if isinstance(node, dict) else {}
    name = node["$ref"].rsplit("/", 1)[-1]
    return {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}, "_ref": name}


def _walk(node: dict, path: str, required: bool, defs: dict, out: list[Key]) -> None:
    out.append(Key(path, node, required))
    if node.get("_ref") == SOURCE:
        return
    _children(node, path, defs, out)


def _children(node: dict, path: str, defs: dict, out: list[Key]) -> None:
    prefix = f"{path}." if path else ""
    needed = set(node.get("required", []))
    for name, child in node.get("properties", {}).items():
        _walk(_resolve(child, defs), prefix + name, name in needed, defs, out)
    items = _resolve(node.get("items"), defs)
    if "properties" in items and items.get("_ref") != SOURCE:
        _children(items, f"{path}[]", defs, out)
    values = _resolve(node.get("additionalProperties"), defs)
    if "properties" in values and values.get("_ref") != SOURCE:
        _children(values, f"{path}.<name>", defs, out)


def schema_keys(schema_path: str | Path) -> list[Key]:
    """Every key of the schema: the experiment's keys, then the source definition's (paths ``<source>.*``)."""
    schema = _load(schema_path)
    defs = schema.get("definitions", {})
    out: list[Key] = []
    _children(schema, "", defs, out)
    _children(defs[SOURCE], "<source>", defs, out)
    return out


# --- formatting -------------------------------------------------------------------------------------

def _flow(value: Any) -> str:
    """A value in YAML flow style, as a config file would write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str) and (not value or value.strip() != value):
        return f'"{value}"'
    return str(value)


def _code(text: str) -> str:
    return f"`{text}`"


def _bounds(node: dict) -> list[str]:
    marks = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    out = [f"{op} {_flow(node[k])}" for k, op in marks.items() if k in node]
    if "pattern" in node:
        out.append(f"matching {_code(node['pattern'])}")
    lo, hi = node.get("minItems"), node.get("maxItems")
    if lo is not None and lo == hi:
        out.append(f"{lo} items")
    else:
        out += [f"at least {lo} item{'s' * (lo != 1)}"] if lo else []
        out += [f"at most {hi} items"] if hi is not None else []
    if "minProperties" in node:
        out.append(f"at least {node['minProperties']} entr{'y' if node['minProperties'] == 1 else 'ies'}")
    return out


def type_text(node: dict, defs: dict) -> str:
    """The key's type in words: type or enum, item and value types, bounds and pattern."""
    node = _resolve(node, defs)
    if node.get("_ref") == SOURCE:
        return "source"
    if "enum" in node:
        text = "one of " + ", ".join(_code(_flow(v)) for v in node["enum"])
    elif "const" in node:
        text = f"exactly {_code(_flow(node['const']))}"
    else:
        kinds = node.get("type", "object" if "properties" in node else "any")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        text = " or ".join("integer" if k == "integer" else k for k in kinds)
        if "array" in kinds and "items" in node:
            item = type_text(node["items"], defs)
            text = "list of " + (f"({item})" if "," in item else item)
            if "properties" in _resolve(node["items"], defs):
                text = "list of objects"
        values = node.get("additionalProperties")
        if "object" in kinds and isinstance(values, dict) and "properties" not in node:
            names = node.get("propertyNames", {}).get("pattern")
            name = f"name ({_code(names)})" if names else "name"
            resolved = _resolve(values, defs)
            inner = "object" if "properties" in resolved and resolved.get("_ref") != SOURCE else \
                type_text(values, defs)
            text = f"map: {name} -> {inner}"
    bounds = _bounds(node)
    return text + (", " + ", ".join(bounds) if bounds else "")


def default_text(key: Key) -> str:
    if key.required:
        return "required"
    if "default" in key.node:
        return _code(_flow(key.node["default"]))
    return "-"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


#: a path or name with a placeholder (work/<exp>/..., <name>-random): shown as code, not as an HTML tag
_PLACEHOLDER = re.compile(r"[\w./-]*<[\w.-]+>[\w./<>-]*")


def prose(text: str) -> str:
    """A schema description as Markdown text: placeholders as code, HTML entities and tags escaped."""
    out = []
    for i, part in enumerate(re.split(r"(`[^`]*`)", text)):
        if i % 2:  # already a code span
            out.append(part)
            continue
        for j, piece in enumerate(re.split(f"({_PLACEHOLDER.pattern})", part)):
            if j % 2:
                out.append(f"`{piece}`")
            else:
                out.append(re.sub(r"<(?=[A-Za-z/!])", "&lt;", re.sub(r"&(\w+;)", r"&amp;\1", piece)))
    return "".join(out)


def _table(keys: list[Key], defs: dict, shown: str = "path") -> list[str]:
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    for k in keys:
        name = k.path if shown == "path" else k.path.split(".", 1)[1]
        rows.append("| " + " | ".join(_cell(c) for c in (_code(name), type_text(k.node, defs),
                                                           default_text(k), prose(k.description))) + " |")
    return rows


def _rule(rule: dict, always: set[str]) -> str:
    """One if/then of the source definition in words: which keys a kind (and format) needs."""
    cond = rule.get("if", {})
    given = set(cond.get("required", [])) | always
    when = " and ".join(f"`{name}: {_flow(p['const'])}`" + ("" if name in given else f" (or no `{name}`)")
                        for name, p in cond.get("properties", {}).items() if "const" in p)
    then = rule.get("then", {})
    options = [alt["required"] for alt in then.get("anyOf", [])] or [then.get("required", [])]
    words = [" and ".join(_code(n) for n in names) for names in options]
    if any(len(names) > 1 for names in options) and len(options) > 1:
        words = [w if len(names) == 1 else f"both {w}" for w, names in zip(words, options)]
        needs = ", or ".join(words)
    else:
        needs = " or ".join(words)
    return f"- with {when}: {needs} must be set"


def _sentence(text: str) -> str:
    """A description as a sentence: capitalised, with a full stop."""
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def render_schema(schema_path: str | Path) -> str:
    """docs/configuration.md: the intro, one table of the top-level keys, one section per top-level key
    with keys of its own, and the sources' section."""
    schema = _load(schema_path)
    defs = schema.get("definitions", {})
    keys = schema_keys(schema_path)
    top = [k for k in keys if "." not in k.path and "[" not in k.path and not k.path.startswith("<")]
    nested = {t.path: [k for k in keys if k.path.startswith((t.path + ".", t.path + "["))] for t in top}
    sections = [t for t in top if nested[t.path]]
    lines = [INTRO]
    desc = " ".join(str(schema.get("description", "")).split())
    lines += [f"The schema describes {desc[0].lower() + desc[1:]}" if desc else "", ""]
    lines += ["## Contents", "", "- [Top-level keys](#top-level-keys)"]
    lines += [f"- [{t.path}](#{t.path})" for t in sections]  # GitHub's anchor of a heading like "mining_eval"
    lines += ["- [Sources](#sources)", "", "## Top-level keys", ""]
    lines += _table(top, defs)
    lines.append("")
    for t in sections:
        need = {"required": "Required.", "-": "Optional."}.get(default_text(t), f"Default: {default_text(t)}.")
        lines += [f"## {t.path}", "", prose(_sentence(t.description)), "",
                  f"Type: {type_text(t.node, defs)}. {need}", ""]
        lines += _table(nested[t.path], defs) + [""]
    users = [k.path for k in keys if k.node.get("_ref") == SOURCE]
    users += [f"{k.path}.<name>" for k in keys
              if _resolve(k.node.get("additionalProperties"), defs).get("_ref") == SOURCE]
    source = defs[SOURCE]
    lines += ["## Sources", "",
              f"A source says {' '.join(str(source.get('description', '')).split())}. These keys take a "
              f"source: {', '.join(_code(u) for u in users)}. Its keys:", ""]
    lines += _table([k for k in keys if k.path.startswith("<source>.")], defs, shown="relative")
    rules = [_rule(r, set(source.get("required", []))) for r in source.get("allOf", []) if "if" in r]
    if rules:
        lines += ["", "Which keys each kind needs:", ""] + rules
    return "\n".join(lines).rstrip("\n") + "\n"
