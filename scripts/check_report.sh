#!/usr/bin/env bash
# Open a Snakemake HTML report in headless Chromium and check it (issue #6):
#   1. a screenshot of the landing page (workflow description + rule graph);
#   2. a DOM check: the single-page app rendered (navbar, result categories, workflow text), no
#      JavaScript error was raised, every embedded result decodes (images load with a size > 0,
#      HTML/TSV/JSON are non-empty) and no page resource points outside the file;
#   3. screenshots of chosen results opened inside the report viewer (images and HTML tables);
#   4. the samples page (samples.html, rule report_samples) loaded on its own: its sections render,
#      the parsed DOM holds no <script> element (corpus text is escaped) and no raw bidirectional
#      override or line separator (they are shown as [U+XXXX] markers); a full-page screenshot.
#
#   bash scripts/check_report.sh [REPORT.html] [OUTDIR]        (make report-check)
#
# REPORT defaults to results/demo/report.html, OUTDIR to <REPORT dir>/report_check (screenshots
# report.png and report-<result>.png, dom.html, check.json, samples.png, samples-dom.html).
# CHECK_RESULTS: space-separated result names to screenshot (default: ledger.png score_histograms.png
# tables.html benchmarks.html samples.html, the ones present). A report without samples.html fails
# unless SAMPLES_OPTIONAL=1 (a report made before rule report_samples existed). Needs chromium; as
# root with apt-get it is installed when missing.
# Exit status 0 only when every check passed.
set -euo pipefail

say() { printf '[check_report] %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

REPORT=${1:-results/demo/report.html}
[[ -s $REPORT ]] || fail "$REPORT does not exist (run: make report)"
REPORT=$(cd "$(dirname "$REPORT")" && pwd)/$(basename "$REPORT")
OUTDIR=${2:-$(dirname "$REPORT")/report_check}
mkdir -p "$OUTDIR"
CHECK_RESULTS=${CHECK_RESULTS:-ledger.png score_histograms.png tables.html benchmarks.html samples.html}
PY=$(command -v python3 || command -v python) || fail "python3 not found"

CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $CHROME ]]; then
    if [[ $(id -u) == 0 ]] && command -v apt-get > /dev/null; then
        say "installing chromium with apt-get"
        apt-get install -y --no-install-recommends chromium > /dev/null \
            || { apt-get update > /dev/null && apt-get install -y --no-install-recommends chromium > /dev/null; }
        CHROME=$(command -v chromium) || fail "chromium did not install"
    else
        fail "no chromium found: install it (Debian/Ubuntu: sudo apt-get install chromium; macOS: brew install --cask chromium)"
    fi
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
chrome() {  # chrome ARGS... URL: one headless run with a fresh profile, offline, bounded in time
    timeout 180 "$CHROME" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$(mktemp -d -p "$TMP")" --virtual-time-budget=10000 "$@" 2>> "$TMP/chrome.log"
}

# copies of the report with a probe script injected: an error collector first in <head>, then
# either the checker (writes JSON into <pre id="mm-check">) or a view switch to one result
"$PY" - "$REPORT" "$TMP" $CHECK_RESULTS << 'EOF'
import json, sys
from pathlib import Path

report, tmp, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
html = report.read_text(encoding="utf-8")
collect = ("<script>window.__mmErrors=[];window.addEventListener('error',function(e){"
           "window.__mmErrors.push(String(e.message||e.type)+' '+(e.filename||''));},true);</script>")
if "<head>" not in html or "</body>" not in html:
    sys.exit(f"{report}: no <head>/<body>: not a Snakemake report")
html = html.replace("<head>", "<head>" + collect, 1)
checker = r"""<script>
window.addEventListener('load', function () { setTimeout(async function () {
  const out = {errors: window.__mmErrors, results: 0, broken: [], external: [], text: ''};
  try {
    out.categories = Object.keys(categories);
    out.results = Object.keys(results).length;
    for (const [path, r] of Object.entries(results)) {
      const uri = r.data_uri || '';
      if (!uri.startsWith('data:')) { out.broken.push(path + ': not embedded'); continue; }
      if (r.mime_type && r.mime_type.startsWith('image/')) {
        const ok = await new Promise(function (res) { const im = new Image();
          im.onload = function () { res(im.naturalWidth > 0 && im.naturalHeight > 0); };
          im.onerror = function () { res(false); }; im.src = uri; });
        if (!ok) out.broken.push(path + ': image does not load');
      } else {
        let text = '';
        try { text = atob(uri.slice(uri.indexOf('base64,') + 7)); } catch (err) { text = ''; }
        if (!text.trim()) out.broken.push(path + ': empty or undecodable');
      }
    }
    for (const el of document.querySelectorAll('img[src],script[src],link[href],iframe[src]')) {
      const u = el.getAttribute('src') || el.getAttribute('href');
      if (!/^(data:|blob:|#|about:)/.test(u)) out.external.push(el.tagName + ' ' + u.slice(0, 120));
    }
    out.text = document.body.innerText.slice(0, 3000);
  } catch (err) { out.errors.push('checker: ' + err); }
  const pre = document.createElement('pre'); pre.id = 'mm-check';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
}, 1500); });
</script>"""
def before_body_end(page: str, script: str) -> str:
    head, sep, tail = page.rpartition("</body>")  # the last one: package sources contain the string too
    return head + script + sep + tail


(tmp / "probe.html").write_text(before_body_end(html, checker), encoding="utf-8")
for name in names:
    view = ("<script>window.addEventListener('load',function(){setTimeout(function(){"
            "const k=Object.keys(results).find(function(p){return results[p].name===%s;});"
            "if(!k){document.body.innerHTML='<h1>missing result %s</h1>';return;}"
            "const img=results[k].mime_type.startsWith('image/');"
            "app.setView({content:img?'img':'html',contentPath:results[k].data_uri,resultPath:k});"
            "},1000);});</script>") % (json.dumps(name), name)
    (tmp / f"view-{name}.html").write_text(before_body_end(html, view), encoding="utf-8")

# the samples page as the report embeds it (a base64 data URI), decoded to a file of its own
import base64, re
m = re.search(r'"name": "samples\.html".*?"data_uri": "data:text/html[^",]*;base64,([A-Za-z0-9+/=]*)"', html, re.S)
if m:
    page = base64.b64decode(m.group(1)).decode("utf-8")
    (tmp / "samples.html").write_text(page, encoding="utf-8")
    height = ("<script id=\"mm-probe\">window.addEventListener('load',function(){const p=document.createElement('pre');"
              "p.id='mm-height';p.textContent=String(document.documentElement.scrollHeight);"
              "document.body.appendChild(p);});</script>")
    (tmp / "samples-probe.html").write_text(before_body_end(page, height), encoding="utf-8")
EOF

say "screenshot of the landing page"
chrome --screenshot="$OUTDIR/report.png" --window-size=1400,2000 "file://$REPORT" > /dev/null
[[ -s $OUTDIR/report.png ]] || fail "no screenshot written (see $TMP/chrome.log)"

say "DOM check"
chrome --dump-dom "file://$TMP/probe.html" > "$OUTDIR/dom.html"
"$PY" - "$OUTDIR/dom.html" "$OUTDIR/check.json" << 'EOF'
import html, json, re, sys

dom = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'<pre id="mm-check">(.*?)</pre>', dom, re.S)
if not m:
    sys.exit("the report's app did not finish rendering (no probe output in the DOM)")
res = json.loads(html.unescape(m.group(1)))
json.dump(res, open(sys.argv[2], "w"), indent=1)
problems = []
if res["errors"]:
    problems.append(f"JavaScript errors: {res['errors']}")
if res["broken"]:
    problems.append(f"broken results: {res['broken']}")
if res["external"]:
    problems.append(f"resources outside the file: {res['external']}")
if not res["results"]:
    problems.append("the report contains no results")
for must in ("Snakemake", "Workflow", "Statistics", *res.get("categories", [])):
    if must not in res["text"]:
        problems.append(f"'{must}' is not shown on the page")
print(f"{res['results']} results in {len(res.get('categories', []))} categories "
      f"({', '.join(res.get('categories', []))}); {len(res['broken'])} broken, {len(res['errors'])} JS errors",
      file=sys.stderr)
if problems:
    sys.exit("\n".join(problems))
EOF

for name in $CHECK_RESULTS; do
    if ! grep -q "\"name\": \"$name\"" "$REPORT"; then
        say "skip $name: not in the report"
        continue
    fi
    say "screenshot of $name inside the report"
    chrome --screenshot="$OUTDIR/report-${name%.*}.png" --window-size=1400,1400 "file://$TMP/view-$name.html" > /dev/null
    [[ -s $OUTDIR/report-${name%.*}.png ]] || fail "no screenshot of $name"
done
if [[ -s $TMP/samples.html ]]; then
    say "samples page: DOM check and full-page screenshot"
    chrome --dump-dom --window-size=1400,2000 "file://$TMP/samples-probe.html" > "$OUTDIR/samples-dom.html"
    HEIGHT=$("$PY" - "$OUTDIR/samples-dom.html" << 'EOF'
import re, sys

dom = open(sys.argv[1], encoding="utf-8").read()
problems = []
if len(re.findall(r"<script[\s>/]", dom, re.I)) != 1:  # the probe's own, which measures the page
    problems.append("a <script> element in the parsed samples page (text not escaped)")
for section in ("removed", "scores", "disagree"):
    if f'id="{section}"' not in dom:
        problems.append(f"section #{section} is missing")
rows = dom.count("<tr>")
if rows < 2:
    problems.append("no sample rows")
raw = sorted({f"U+{ord(c):04X}" for c in re.findall("[\u202a-\u202e\u2066-\u2069\u2028\u2029]", dom)})
if raw:
    problems.append(f"raw bidirectional overrides or line separators in the page: {raw}")
print(f"samples page: {rows} table rows, {dom.count('[U+')} [U+XXXX] markers", file=sys.stderr)
if problems:
    sys.exit("\n".join(problems))
m = re.search(r'<pre id="mm-height">(\d+)</pre>', dom)
if not m:
    sys.exit("the samples page did not finish loading (no height measured)")
height = int(m.group(1))
if height > 20000:
    print(f"samples page: {height} px tall, the screenshot shows the first 20000", file=sys.stderr)
print(min(20000, height))  # every row in one screenshot, up to Chromium's limit
EOF
    ) || fail "the samples page does not pass its check"
    chrome --screenshot="$OUTDIR/samples.png" --window-size="1400,$HEIGHT" "file://$TMP/samples.html" > /dev/null
    [[ -s $OUTDIR/samples.png ]] || fail "no screenshot of the samples page"
elif [[ ${SAMPLES_OPTIONAL:-0} != 1 ]]; then
    fail "no samples.html in the report (rule report_samples, make report; SAMPLES_OPTIONAL=1 skips this check)"
fi
say "OK: $REPORT renders; screenshots and check.json in $OUTDIR"
