"""Steps decide, the clock only guards (marginmine.timecap): a wall-clock cap that ends training before
its steps is an error by default, and with ``on_time_cap: warn`` a warning that reaches every result
built on the model (the manifest, the comparison, the summary, the HTML report's tables, the README's
key-result block). The caps are made to bind with a real DAN on real Tatoeba pairs and a tiny cap."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from marginmine import timecap
from marginmine.cli.main import main
from marginmine.encoders import dual_train
from marginmine.encoders.base import load_encoder
from marginmine.report.docsresults import key_result
from marginmine.report.summary import write_summary
from marginmine.report.tables import tables_html
from test_comparison import compare, fake_run

TINY = {"arch": "dan", "vocab_size": 200, "spm_sample": 2000, "buckets": 4096, "dim": 16, "batch_size": 32,
        "epochs": 2, "threads": 1, "max_len": 32}


@pytest.fixture(scope="module")
def data_manifest(tmp_path_factory, real_data: Path) -> Path:
    d = real_data / "tatoeba-manythings-deu-eng-2018"
    en = (d / "train.nooverlap.en").read_text(encoding="utf-8").split("\n")[::350][:400]
    de = (d / "train.nooverlap.de").read_text(encoding="utf-8").split("\n")[::350][:400]
    tmp = tmp_path_factory.mktemp("cap_data")
    (tmp / "train.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp / "train.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp / "manifest.json").write_text(json.dumps([{"src_lang": "de", "tgt_lang": "en", "src": "train.de",
                                                    "tgt": "train.en"}]))
    return tmp / "manifest.json"


def train(data: Path, out: Path, work: Path, *extra: str) -> int:
    return main(["train-encoder", "--kind", "dual", "--data", str(data), "--output", str(out), "--workdir",
                 str(work), "--params", json.dumps(TINY), "--seed", "7", *extra])


def stop_the_clock_after(monkeypatch: pytest.MonkeyPatch, readings: int) -> None:
    """The DAN's clock jumps past any cap after ``readings`` readings: a cap that binds mid-training."""
    calls = iter(range(10**6))
    monkeypatch.setattr(dual_train.time, "monotonic", lambda: 0.0 if next(calls) < readings else 1e9)


def test_a_binding_cap_is_an_error_and_the_rerun_resumes_to_the_steps(data_manifest: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    out, work = tmp_path / "encoder", tmp_path / "work"
    with monkeypatch.context() as m:
        stop_the_clock_after(m, 20)
        assert train(data_manifest, out, work, "--max-minutes", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert re.search(r"training stopped by its time cap max_minutes=1\.0 after \d+ steps", err[0]), err[0]
    assert "Rerun to resume" in err[0] and "on_time_cap: warn" in err[0]
    assert not out.exists()                                  # nothing exported
    assert not (work / "encoder.json").exists() and (work / "checkpoints" / "last.pt").exists()   # the state
    # the rerun with a cap that does not bind resumes and ends by its epochs: an encoder, no warning
    assert train(data_manifest, out, work, "--max-minutes", "30") == 0
    info = json.loads((out / "encoder.json").read_text())["info"]
    assert info["stopped_by"] == "epochs" and info["steps"] == 2 * (400 // 32) and timecap.FIELD not in info
    assert load_encoder(out).encode(["Hallo!"], "de").shape == (1, 16)
    # a cap that ends training before its first step: an error whatever on_time_cap says
    assert train(data_manifest, tmp_path / "e0", tmp_path / "w0", "--max-minutes", "1e-6", "--on-time-cap",
                 "warn") == 2
    assert "Not one training step was taken" in capsys.readouterr().err and not (tmp_path / "e0").exists()


def test_warn_keeps_the_model_and_every_result_built_on_it_says_so(data_manifest: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results" / "demo"
    out = results / "encoder"
    with monkeypatch.context() as m:
        stop_the_clock_after(m, 20)
        assert train(data_manifest, out, tmp_path / "work", "--max-minutes", "1", "--on-time-cap", "warn") == 0
    info = json.loads((out / "encoder.json").read_text())["info"]
    text = info[timecap.FIELD]
    assert info["stopped_by"] == "max_minutes" and 0 < info["steps"] < 2 * (400 // 32)
    assert text.startswith(f"encoder {out} (trained in {tmp_path / 'work'}): training stopped by its time cap "
                           f"max_minutes=1.0 after {info['steps']} steps")
    load_encoder(out)                                        # the manifest's hashes still hold
    assert timecap.caps_under([results]) == [text]

    # an NMT system its cap cut short (its bleu.json carries the manifest's warning) beside one that was not
    nmt_cap = ("NMT system work/demo/nmt/cosine.20k/seed1: training stopped by its time cap max_minutes=40 after 812 "
               "of 1,000 updates")
    files = [fake_run(results, "ratio", "20k", s, 0.1) for s in (1, 2)]
    files += [fake_run(results, "cosine", "20k", s, 0.12) for s in (1, 2)]
    report = json.loads(files[2].read_text())
    report["meta"]["time_cap"] = nmt_cap
    files[2].write_text(json.dumps(report))
    assert compare(results, files, "--caps-from", str(results)) == 0
    md = (results / "cmp.md").read_text()
    assert "**Warning - a time cap cut training short" in md and f"- {text}" in md and f"- {nmt_cap}" in md
    assert main(["headline", "--inputs", *map(str, files[2:]), "--output", str(results / "bleu_20k.txt")]) == 0
    assert f"WARNING {nmt_cap}" in (results / "bleu_20k.txt").read_text()

    caps = timecap.caps_under([results])
    assert caps == sorted([text, nmt_cap])
    write_summary(["system", "N"], [{"system": "ratio", "N": "20k"}], tmp_path / "s.tsv", tmp_path / "s.md", "S", [],
                  caps=caps)
    assert f"- {nmt_cap}" in (tmp_path / "s.md").read_text()
    tables = tables_html([], "t", caps)
    assert "a time cap cut training short" in tables and "812 of 1,000" in tables
    shutil.copy(results / "cmp.tsv", results / "comparison.tsv")
    block = key_result(results, "abc")
    assert f"- {text}" in block and f"- {nmt_cap}" in block
    # without a recorded warning nothing is added
    assert "time cap" not in tables_html([], "t", timecap.caps_under([tmp_path / "elsewhere"]))
    # a manifest written before on_time_cap (a stop by the clock, no record) is reported too
    old = tmp_path / "old" / "encoder"
    shutil.copytree(out, old)
    manifest = json.loads((old / "encoder.json").read_text())
    del manifest["info"][timecap.FIELD]
    (old / "encoder.json").write_text(json.dumps(manifest))
    assert timecap.caps_under([old.parent]) == [timecap.describe(manifest["info"], f"{old} (no on_time_cap record)")]


def test_policy_values_and_descriptions() -> None:
    assert timecap.check_policy(None) == "error"
    with pytest.raises(Exception, match="not one of error, warn"):
        timecap.check_policy("ignore")
    nmt = {"max_minutes": 40, "params": {"max_update": 1000}, "num_updates": 812, "stopped_by_time": True}
    with pytest.raises(timecap.TimeCapError, match="after 812 of 1,000 updates"):
        timecap.enforce(nmt, "NMT system x", None)
    assert "after 812 of 1,000 updates" in timecap.enforce(nmt, "NMT system x", "warn")
    assert timecap.enforce({**nmt, "stopped_by_time": False}, "NMT system x", None) is None
    # fairseq logs the time stop also on the update that reached max_update: not a cap that bound
    assert timecap.enforce({**nmt, "num_updates": 1000}, "NMT system x", None) is None
    epochs = {"max_minutes": 30, "params": {"max_epoch": 2}, "num_updates": 90, "epoch": 2, "stopped_by_time": True}
    assert "after 90 updates (epoch 2 of 2)" in timecap.describe(epochs, "x")


def test_the_shipped_configs_guard_with_caps_that_error() -> None:
    """demo, test, scale and published configs: every cap is a safety cap (error when it binds), and the
    demo's DAN and NMT caps leave at least 4x the slowest measured need (14 and 16 min)."""
    schema = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
    enc_props = schema["properties"]["encoder"]["properties"]["models"]["additionalProperties"]["properties"]
    nmt_props = schema["properties"]["nmt"]["properties"]
    assert enc_props["on_time_cap"]["default"] == "error" == nmt_props["on_time_cap"]["default"]
    from marginmine.defaults import ON_TIME_CAP
    assert ON_TIME_CAP == "error"
    for name in ("demo.yaml", "test.yaml", "scale.yaml", "demo-laser.yaml"):
        cfg = yaml.safe_load((REPO / "config" / name).read_text())
        for model in ((cfg.get("encoder") or {}).get("models") or {}).values():
            assert model.get("on_time_cap", "error") == "error", name
        assert (cfg.get("nmt") or {}).get("on_time_cap", "error") == "error", name
    demo = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    assert demo["encoder"]["models"]["dan"]["max_minutes"] >= 4 * 14 and demo["nmt"]["max_minutes"] >= 4 * 16
    test = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    assert all(m.get("max_minutes", 30) >= 30 for m in test["encoder"]["models"].values())
