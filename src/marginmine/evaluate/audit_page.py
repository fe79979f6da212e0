"""The audit's labelling page: one self-contained HTML file (no network, no server) that shows each
sampled pair, escaped as the samples page escapes it (:func:`marginmine.report.sample_pages.visible_html`),
and lets a person mark it good, bad or unsure with a click or a key:

* ``g`` / ``1`` good, ``b`` / ``2`` bad, ``u`` / ``3`` unsure, ``0`` / Backspace clears; ``j`` / ArrowDown
  and ``k`` / ArrowUp move; marking moves to the next pair;
* the marks are kept in the browser's ``localStorage`` under a key of the sample's digest, so a reload
  (or closing the tab) keeps them, and another sample never sees them;
* "Export labels" downloads the sample TSV with its ``label`` column filled (``audit_labels.tsv``),
  which ``marginmine audit-estimate --labels`` reads.

The sample's TSV fields are embedded as JSON (``<`` written ``\\u003c``), so the export is the sample
file byte for byte but for the labels. Texts are never inserted as HTML by the script.
"""

from __future__ import annotations

import hashlib
import html
import json
from pathlib import Path

from marginmine.io.markup import html_page, tsv_text, visible_html

_CSS = """
.pair{cursor:pointer} .pair.current td{border-top:3px solid #1f6feb;border-bottom:3px solid #1f6feb}
.pair.good td{background:#e6f4ea} .pair.bad td{background:#fbe9e7} .pair.unsure td{background:#fff8e1}
.mark button{margin:1px} .mark button.on{font-weight:bold;text-decoration:underline}
#bar{position:sticky;top:0;background:#fff;padding:.4em 0;border-bottom:1px solid #ccc}
td.text{max-width:38em}
"""

_JS = r"""
(function(){
  const sample = JSON.parse(document.getElementById('sample').textContent);
  const key = 'marginmine-audit:' + sample.digest;
  let marks = {};
  try { marks = JSON.parse(localStorage.getItem(key) || '{}'); } catch (e) { marks = {}; }
  const rows = Array.from(document.querySelectorAll('tr.pair'));
  let current = 0;
  let stored = true;
  function save(){
    try { localStorage.setItem(key, JSON.stringify(marks)); }
    catch (e) { if (stored) { stored = false; alert('This browser does not keep the marks (local storage is off): export them before closing the page.'); } }
  }
  function paint(){
    let done = 0;
    rows.forEach(function(r){
      const m = marks[r.dataset.item] || '';
      r.classList.remove('good','bad','unsure');
      if (m) { r.classList.add(m); done += 1; }
      r.querySelectorAll('button[data-label]').forEach(function(b){ b.classList.toggle('on', b.dataset.label === m); });
      r.querySelector('.label').textContent = m;
    });
    document.getElementById('count').textContent = done + ' of ' + rows.length + ' marked';
  }
  function focus(i){
    if (!rows.length) return;
    current = Math.max(0, Math.min(rows.length - 1, i));
    rows.forEach(function(r, j){ r.classList.toggle('current', j === current); });
    rows[current].scrollIntoView({block: 'nearest'});
  }
  function mark(i, label){
    const item = rows[i].dataset.item;
    if (label) { marks[item] = label; } else { delete marks[item]; }
    save(); paint();
  }
  rows.forEach(function(r, i){
    r.addEventListener('click', function(){ focus(i); });
    r.querySelectorAll('button[data-label]').forEach(function(b){
      b.addEventListener('click', function(ev){ ev.stopPropagation(); focus(i); mark(i, b.dataset.label); focus(i + 1); });
    });
  });
  const keys = {g: 'good', '1': 'good', b: 'bad', '2': 'bad', u: 'unsure', '3': 'unsure'};
  document.addEventListener('keydown', function(ev){
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (keys[ev.key]) { mark(current, keys[ev.key]); focus(current + 1); ev.preventDefault(); }
    else if (ev.key === '0' || ev.key === 'Backspace') { mark(current, ''); ev.preventDefault(); }
    else if (ev.key === 'j' || ev.key === 'ArrowDown') { focus(current + 1); ev.preventDefault(); }
    else if (ev.key === 'k' || ev.key === 'ArrowUp') { focus(current - 1); ev.preventDefault(); }
  });
  document.getElementById('export').addEventListener('click', function(){
    const li = sample.header.indexOf('label'), ii = sample.header.indexOf('item');
    const lines = [sample.header.join('\t')].concat(sample.rows.map(function(r){
      const out = r.slice(); out[li] = marks[r[ii]] || ''; return out.join('\t');
    }));
    const blob = new Blob([lines.join('\n') + '\n'], {type: 'text/tab-separated-values'});
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob); a.download = 'audit_labels.tsv';
    document.body.appendChild(a); a.click(); a.remove();
  });
  paint(); focus(0);
})();
"""  # noqa: E501 - the page's script as it is written into the page: two statements stay one line each


def audit_page(sample_tsv: str | Path, out_html: str | Path, title: str, intro: str = "") -> None:
    """Write the labelling page of the sample TSV (:data:`marginmine.evaluate.audit_files.SAMPLE_COLUMNS`)."""
    from marginmine.evaluate.audit_files import read_sample
    from marginmine.io.safe import write_text

    raw = Path(sample_tsv).read_bytes()
    header, body = read_sample(sample_tsv, ("item", "src", "tgt", "label"))
    ci, cs, ct = header.index("item"), header.index("src"), header.index("tgt")
    data = {"digest": hashlib.sha256(raw).hexdigest()[:16], "header": header, "rows": body}
    payload = (json.dumps(data, ensure_ascii=False)
               .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    trs = "".join(
        f'<tr class="pair" data-item="{html.escape(r[ci])}"><td>{html.escape(r[ci])}</td>'
        f'<td class="text" dir="auto">{visible_html(tsv_text(r[cs]))}</td>'
        f'<td class="text" dir="auto">{visible_html(tsv_text(r[ct]))}</td>'
        '<td class="mark"><button data-label="good">good (g)</button><button data-label="bad">bad (b)</button>'
        '<button data-label="unsure">unsure (u)</button></td><td class="label"></td></tr>' for r in body)
    body_html = (f"<style>{_CSS}</style><p>{html.escape(intro)}</p>"
                 '<div id="bar"><button id="export">Export labels</button> <span id="count"></span> '
                 "· keys: g good, b bad, u unsure, 0 clear, j/k next/previous</div>"
                 "<table><thead><tr><th>item</th><th>source</th><th>target</th><th>mark</th><th>label</th></tr></thead>"
                 f"<tbody>{trs}</tbody></table>"
                 f'<script type="application/json" id="sample">{payload}</script><script>{_JS}</script>')
    write_text(out_html, html_page(title, body_html))

