"""The audit's labelling page in headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright; `make test` installs the browser first): clicks and keys mark pairs, a reload keeps
the marks, the export equals the marks, and `marginmine audit-estimate` reads the exported file.
No browser is a failure, never a skip."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from marginmine.cli.main import main
from marginmine.evaluate.audit import allocate, draw_ranks, plan_strata, ranks_of
from marginmine.evaluate.audit_files import SAMPLE_COLUMNS
from marginmine.evaluate.filtereval import read_paracrawl_eval

PARACRAWL = "paracrawl-human-eval-en-de/paracrawl-v3-validation-data.sorted.en-de.tsv"
CHROMIUM = os.environ.get("MARGINMINE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
HOSTILE = "<script>window.hostile = 1</script> <b>bold</b> \u202eevil"


@pytest.fixture(scope="module")
def sample(real_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An audit sample of 40 real ParaCrawl pairs ranked by BiCleaner's score, one of them hostile."""
    d = read_paracrawl_eval(real_data / PARACRAWL)
    out = tmp_path_factory.mktemp("audit")
    src = list(d.src)
    # the draw depends on the scores only: make a pair the sample draws hostile
    edges = plan_strata(len(src), 5, [500])
    drawn = draw_ranks(edges, allocate(edges, 40), 3)
    src[int(np.argsort(ranks_of(d.shipped["bicleaner"]))[drawn[0]])] = HOSTILE
    (out / "pairs.tsv").write_text("".join(f"{s}\t{t}\tpc:{i}\n" for i, (s, t) in enumerate(zip(src, d.tgt))))
    (out / "scores.tsv").write_text("bicleaner\n" + "".join(f"{v:.6f}\n" for v in d.shipped["bicleaner"]))
    assert main(["audit-sample", "--pairs", str(out / "pairs.tsv"), "--scores", str(out / "scores.tsv"),
                 "--scorer", "bicleaner", "--labels", "40", "--strata", "5", "--sizes", "500", "--seed", "3",
                 "--tsv", str(out / "sample.tsv"), "--plan", str(out / "plan.json"), "--html",
                 str(out / "sample.html")]) == 0
    return out


def _browser(p):  # noqa: ANN001, ANN202
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: make test installs Debian's chromium (make browser), or set "
                    "MARGINMINE_CHROMIUM")
    return p.chromium.launch(executable_path=CHROMIUM, args=ARGS)


def test_marks_survive_a_reload_and_the_export_is_read_back(sample: Path, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    url = (sample / "sample.html").as_uri()
    lines = (sample / "sample.tsv").read_text(encoding="utf-8").splitlines()
    header, rows = lines[0].split("\t"), [r.split("\t") for r in lines[1:]]
    assert tuple(header) == SAMPLE_COLUMNS and len(rows) == 40
    with sync_playwright() as p:
        browser = _browser(p)
        page = browser.new_context(accept_downloads=True).new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        pairs = page.locator("tr.pair")
        assert pairs.count() == 40
        # a click on a button marks its pair and moves on; keys mark the current pair
        pairs.nth(0).locator("button[data-label=good]").click()
        page.keyboard.press("b")          # pair 2 (the click moved to it)
        page.keyboard.press("u")          # pair 3
        page.keyboard.press("j")          # skip pair 4
        page.keyboard.press("2")          # pair 5: bad
        pairs.nth(6).click()
        page.keyboard.press("g")          # pair 7: good
        pairs.nth(9).locator("button[data-label=bad]").click()
        pairs.nth(9).locator("button[data-label=good]").click()  # changed its mind: pair 10 good
        page.keyboard.press("k")          # back to pair 10 (the click moved to 11)
        page.keyboard.press("k")          # pair 9
        page.keyboard.press("b")
        page.keyboard.press("k")          # back to pair 9 ...
        page.keyboard.press("0")          # ... and cleared
        want = {1: "good", 2: "bad", 3: "unsure", 5: "bad", 7: "good", 10: "good"}

        def marks() -> dict[int, str]:
            return {i + 1: m for i in range(40) if (m := pairs.nth(i).locator(".label").inner_text().strip())}

        assert marks() == want
        assert page.locator("#count").inner_text() == "6 of 40 marked"
        page.reload()
        assert marks() == want, "a reload lost the marks"
        for i, m in want.items():
            assert m in (pairs.nth(i - 1).get_attribute("class") or "")
        with page.expect_download() as info:
            page.click("#export")
        exported = tmp_path / "labels.tsv"
        shutil.copy(info.value.path(), exported)
        # the hostile text is shown as text, never run or parsed as markup
        assert page.evaluate("window.hostile") is None and not dialogs
        assert page.locator("tr.pair b").count() == 0
        assert sum(r[header.index("src")].startswith("<script>") for r in rows) == 1
        assert page.get_by_text("<script>window.hostile", exact=False).count() == 1
        assert page.locator("span.cc").count() >= 1  # U+202E shown as a marker
        page.screenshot(path=os.environ.get("MARGINMINE_AUDIT_SCREENSHOT", str(tmp_path / "page.png")))
        browser.close()
    out = exported.read_text(encoding="utf-8").splitlines()
    assert out[0] == lines[0] and len(out) == 41
    for i, (line, orig) in enumerate(zip(out[1:], lines[1:]), 1):
        cols, ocols = line.split("\t"), orig.split("\t")
        assert cols[:-1] == ocols[:-1], "the export changed a field other than the label"
        assert cols[-1] == want.get(int(cols[0]), "")
    est = tmp_path / "est"
    assert main(["audit-estimate", "--plan", str(sample / "plan.json"), "--labels", str(exported), "--tsv",
                 str(est / "e.tsv"), "--md", str(est / "e.md"), "--json", str(est / "e.json"), "--png",
                 str(est / "e.png")]) == 0
    result = json.loads((est / "e.json").read_text())
    assert result["labels"] == {"good": 3, "bad": 2, "unsure": 1, "unlabelled": 34}
