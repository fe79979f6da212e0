"""The text formats every stage writes, escaped so that web text cannot break them.

Corpus text is web text: markup, bidirectional controls, control characters, line separators.

* HTML (:func:`visible_html`): every text is escaped (``<script>`` in a sentence is shown, never run)
  and every control character, Unicode format character (the bidirectional marks and overrides
  U+200E/F, U+202A-E, U+2066-9, zero-width spaces, BOM; not the joiners U+200C/D that Persian, Indic
  scripts and emoji need) and line or paragraph separator (U+2028/9) is replaced by a visible marker
  such as ``[U+202E]`` that names it. :func:`html_page` wraps a body in a self-contained page.
* TSV (:func:`tsv_field`, :func:`tsv_text`): one line per pair, always: a backslash is written
  ``\\\\``, a tab ``\\t``, a newline ``\\n``, a carriage return ``\\r``, and every other control
  character and U+2028/9 ``\\uXXXX``.
* Markdown (:func:`md_table`): a table whose cells cannot end early (``|`` escaped).
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence

#: joiners that scripts and emoji need inside words: shown as they are
_KEEP = {"\u200c", "\u200d"}
_MARKED = ("Cc", "Cf", "Zl", "Zp", "Cs", "Co")


def _is_marked(ch: str) -> bool:
    return ch not in _KEEP and unicodedata.category(ch) in _MARKED


def visible_html(text: str) -> str:
    """``text`` as HTML: escaped, and each invisible or layout-changing character a visible marker."""
    out = []
    for ch in text:
        if _is_marked(ch):
            name = unicodedata.name(ch, "control character")
            out.append(f'<span class="cc" title="{html.escape(name)}">[U+{ord(ch):04X}]</span>')
        else:
            out.append(html.escape(ch))
    return "".join(out)


_TSV_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_TSV_SPECIAL = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029]")


def tsv_field(text: str) -> str:
    """``text`` as one TSV field that cannot break its line (see the module docstring)."""
    return _TSV_SPECIAL.sub(lambda m: _TSV_ESCAPES.get(m.group(0), f"\\u{ord(m.group(0)):04x}"), text)


_TSV_UNESCAPES = {v: k for k, v in _TSV_ESCAPES.items()}


def tsv_text(field: str) -> str:
    """A field written by :func:`tsv_field` back to its text."""
    return re.sub(r"\\\\|\\t|\\n|\\r|\\u[0-9a-f]{4}",
                  lambda m: _TSV_UNESCAPES.get(m.group(0)) or chr(int(m.group(0)[2:], 16)), field)


_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;font-size:14px;margin:1.2em;color:#222}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;margin:0.6em 0 1.4em 0}
caption{text-align:left;font-weight:600;padding:0.3em 0}
th,td{border-bottom:1px solid #ddd;padding:3px 9px}
th{background:#f3f5f8;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.strong td{font-weight:600;background:#fafafa}
p{max-width:60em}
"""


def html_page(title: str, body: str) -> str:
    """A self-contained HTML page (inline CSS, no external resources)."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>\n")


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(str(v).replace("|", "\\|") for v in r) + " |" if i != 1 else "|" + "---|" * len(header)
            for i, r in enumerate([header, header, *rows])]
