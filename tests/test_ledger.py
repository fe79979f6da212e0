"""The ledger accounts for every pair and chains split + shard stages exactly."""

from __future__ import annotations

import pytest

from marginmine.preprocess.ledger import Ledger, length_bucket


def test_buckets() -> None:
    assert length_bucket("") == "0-2"
    assert length_bucket("a b") == "0-2"
    assert length_bucket("a b c") == "3-5"
    assert length_bucket(" ".join("x" * 1 for _ in range(81))) == "81+"


def test_step_table_and_roundtrip(tmp_path) -> None:
    led = Ledger()
    led.declare(["read", "dedup", "length"])
    led.add_removed("read", "empty", "0-2")
    led.add_removed("length", "too_short", "0-2")
    led.add_kept("3-5")
    led.add_kept("3-5")
    rows = {r["step"]: r for r in led.step_table()}
    assert rows["read"]["in"] == 4 and rows["read"]["kept"] == 3
    assert rows["dedup"]["removed"] == 0 and rows["length"]["in"] == 3 and rows["length"]["kept"] == 2
    led.write(tmp_path / "l.json")
    back = Ledger.read(tmp_path / "l.json")
    assert back.to_dict() == led.to_dict()
    assert (tmp_path / "l.tsv").read_text().startswith("step\treason\tbucket\tcount\n")


def test_then_chains_and_detects_lost_pairs() -> None:
    split = Ledger()
    split.add_removed("dedup", "duplicate", "3-5")
    for _ in range(3):
        split.add_kept("3-5")
    shard = Ledger()
    shard.add_removed("langid", "wrong_lang_src", "3-5")
    shard.add_kept("3-5")
    shard.add_kept("3-5")
    total = split.then(shard)
    assert total.total_in == 4 and total.total_kept == 2
    total.check()
    lost = Ledger()
    lost.add_kept("3-5")
    with pytest.raises(AssertionError, match="saw 1 pairs"):
        split.then(lost)
