"""The dual encoder: loss, id batching, tiny real trainings (load, determinism, resume) and quality."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from marginmine.encoders import dual, dual_model, dual_train
from marginmine.encoders.base import EncoderError, ParallelData, SentenceEncoder, load_encoder

TINY = {"vocab_size": 200, "spm_sample": 2000, "buckets": 4096, "emb_dim": 32, "hidden": 32, "dim": 16,
        "d_model": 32, "ffn": 64, "heads": 2, "batch_size": 32, "epochs": 2, "threads": 1, "max_len": 32}


# ---------------------------------------------------------------------------------------------
# pure helpers


def test_in_batch_loss_hand_computed() -> None:
    src = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    tgt = torch.tensor([[0.6, 0.8], [0.0, 1.0]])
    # cos = [[0.6, 0], [0.8, 1]]; logits = 10 * (cos - 0.3 I) = [[3, 0], [8, 7]]
    rows = [math.log(1 + math.exp(-3)), math.log(1 + math.exp(1))]      # src -> tgt (rows)
    cols = [math.log(1 + math.exp(5)), math.log(1 + math.exp(-7))]      # tgt -> src (columns)
    expected = 0.5 * (sum(rows) / 2 + sum(cols) / 2)
    got = dual_model.in_batch_loss(src, tgt, scale=10.0, margin=0.3)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    # no margin: logits 10 * cos
    rows0 = [math.log(1 + math.exp(-6)), math.log(1 + math.exp(-2))]
    cols0 = [math.log(1 + math.exp(2)), math.log(1 + math.exp(-10))]
    expected0 = 0.5 * (sum(rows0) / 2 + sum(cols0) / 2)
    assert dual_model.in_batch_loss(src, tgt, 10.0, 0.0).item() == pytest.approx(expected0, rel=1e-6)


def test_margin_increases_loss_and_loss_is_symmetric() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.nn.functional.normalize(torch.randn(8, 5, generator=g), dim=1)
    b = torch.nn.functional.normalize(torch.randn(8, 5, generator=g), dim=1)
    assert dual_model.in_batch_loss(a, b, 20.0, 0.3) > dual_model.in_batch_loss(a, b, 20.0, 0.0)
    swapped = dual_model.in_batch_loss(b, a, 20.0, 0.3).item()
    assert dual_model.in_batch_loss(a, b, 20.0, 0.3).item() == pytest.approx(swapped)


def test_bigram_hash_is_deterministic_in_range_and_ordered() -> None:
    a = np.arange(1000)
    b = (np.arange(1000) * 7) % 1000
    h = dual_model.bigram_hash(a, b, 1 << 10)
    assert h.min() >= 0 and h.max() < 1 << 10
    assert np.array_equal(h, dual_model.bigram_hash(a, b, 1 << 10))
    assert len(np.unique(h)) > 500                       # spreads over the buckets
    assert (dual_model.bigram_hash(a, b, 1 << 18) != dual_model.bigram_hash(b, a, 1 << 18)).mean() > 0.99


def test_dan_bags_offsets_bigrams_and_empty_sentence() -> None:
    flat = np.array([5, 6, 7, 8], dtype=np.int32)
    lengths = np.array([3, 0, 1])
    ids, offsets = dual_model.dan_bags(flat, lengths, vocab=10, buckets=16)
    h = dual_model.bigram_hash(np.array([5, 6]), np.array([6, 7]), 16)
    assert ids.tolist() == [5, 6, 7, 10 + h[0], 10 + h[1], 8]
    assert offsets.tolist() == [0, 5, 5]
    bag = torch.nn.EmbeddingBag(26, 3, mode="mean")
    out = bag(torch.from_numpy(ids), torch.from_numpy(offsets))
    w = bag.weight.detach()
    assert torch.allclose(out[0], w[ids[:5]].mean(0))
    assert torch.equal(out[1], torch.zeros(3))          # empty sentence: empty bag
    assert torch.allclose(out[2], w[8])


def test_pad_ids_and_gather() -> None:
    flat = np.array([5, 6, 7, 8, 9], dtype=np.int32)
    lengths = np.array([3, 0, 2])
    assert dual_model.pad_ids(flat, lengths, pad=99).tolist() == [[5, 6, 7], [99, 99, 99], [8, 9, 99]]
    sub, sub_len = dual_model.gather(flat, np.array([0, 3, 3]), lengths, np.array([2, 0, 1, 2]))
    assert sub.tolist() == [8, 9, 5, 6, 7, 8, 9] and sub_len.tolist() == [2, 3, 0, 2]
    assert dual_model.pad_ids(np.zeros(0, np.int32), np.array([0, 0]), pad=1).tolist() == [[1], [1]]


def test_length_batches_respect_both_limits() -> None:
    lengths = np.array([0, 1, 2, 2, 3, 5, 8, 100])
    batches = dual_model.length_batches(lengths, max_sentences=3, max_tokens=10)
    assert [(b.start, b.stop) for b in batches] == [(0, 3), (3, 5), (5, 6), (6, 7), (7, 8)]
    for b in batches:
        assert b.stop - b.start == 1 or (b.stop - b.start) * lengths[b.stop - 1] <= 10
    assert dual_model.length_batches(np.zeros(0, np.int64), 4, 10) == []


def test_epoch_order_depends_only_on_seed_and_epoch() -> None:
    p1, s1 = dual_model.epoch_order(3, 1, 50)
    p2, s2 = dual_model.epoch_order(3, 1, 50)
    assert np.array_equal(p1, p2) and np.array_equal(s1, s2)
    assert sorted(p1.tolist()) == list(range(50))
    assert not np.array_equal(p1, dual_model.epoch_order(3, 2, 50)[0])


def test_epoch_batches_cover_pairs_and_sort_windows() -> None:
    lengths = np.random.default_rng(0).integers(1, 40, size=103)
    plain, swap = dual_model.epoch_batches(5, 0, lengths, 10, sort_window=1)
    assert len(plain) == 10 and all(len(b) == 10 for b in plain)
    assert len(set(np.concatenate(plain).tolist())) == 100 and swap.dtype == bool
    assert np.array_equal(np.concatenate(plain), dual_model.epoch_order(5, 0, 103)[0][:100])
    sorted_, _ = dual_model.epoch_batches(5, 0, lengths, 10, sort_window=5)
    assert sorted(np.concatenate(sorted_).tolist()) == sorted(np.concatenate(plain).tolist())
    spread = lambda bs: np.mean([np.ptp(lengths[b]) for b in bs])  # noqa: E731
    assert spread(sorted_) < spread(plain) / 2                       # less padding
    small, _ = dual_model.epoch_batches(5, 0, lengths[:7], 10, sort_window=5)
    assert len(small) == 1 and sorted(small[0].tolist()) == list(range(7))
    assert dual_model.epoch_batches(5, 0, lengths[:1], 10, sort_window=1)[0] == []


def test_unknown_params_are_refused() -> None:
    with pytest.raises(EncoderError, match="batchsize"):
        dual_train.resolve_params({"batchsize": 5})
    with pytest.raises(EncoderError, match="arch"):
        dual_train.resolve_params({"arch": "cnn"})
    with pytest.raises(EncoderError, match="optimizer 'adagrad'"):
        dual_train.resolve_params({"optimizer": "adagrad"})
    with pytest.raises(EncoderError, match="margin must be >= 0"):
        dual_train.resolve_params({"margin": -0.1})


def test_lr_schedules_warm_up_then_decay_to_zero_at_max_steps() -> None:
    lr = dual_model.lr_at
    assert [lr(s, 1.0, "constant", 0, None) for s in (0, 10, 10**6)] == [1.0, 1.0, 1.0]
    assert [lr(s, 2.0, "constant", 4, None) for s in (0, 1, 3, 4)] == [0.5, 1.0, 2.0, 2.0]
    # warm-up 10 steps to 1.0, then linear from 1.0 (step 10) to 0 (step 110)
    assert lr(9, 1.0, "linear", 10, 110) == 1.0 and lr(10, 1.0, "linear", 10, 110) == 1.0
    assert lr(60, 1.0, "linear", 10, 110) == pytest.approx(0.5) and lr(110, 1.0, "linear", 10, 110) == 0.0
    assert lr(500, 1.0, "linear", 10, 110) == 0.0
    assert lr(60, 1.0, "cosine", 10, 110) == pytest.approx(0.5)
    assert lr(35, 1.0, "cosine", 10, 110) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert lr(110, 1.0, "cosine", 10, 110) == pytest.approx(0.0)
    with pytest.raises(EncoderError, match="max_steps"):
        lr(5, 1.0, "linear", 0, None)
    with pytest.raises(EncoderError, match="max_steps"):
        dual_train.resolve_params({"lr_schedule": "cosine"})
    with pytest.raises(EncoderError, match="lr_schedule"):
        dual_train.resolve_params({"lr_schedule": "step", "max_steps": 10})


# ---------------------------------------------------------------------------------------------
# tiny real trainings


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory, real_data: Path) -> list[ParallelData]:
    d = real_data / "tatoeba-manythings-deu-eng-2018"
    en = _lines(d / "train.nooverlap.en")[::350][:400]
    de = _lines(d / "train.nooverlap.de")[::350][:400]
    tmp = tmp_path_factory.mktemp("dual_data")
    (tmp / "train.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp / "train.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    return [ParallelData("de", "en", tmp / "train.de", tmp / "train.en")]


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory, tiny_data) -> Path:
    return dual.train(tiny_data, tmp_path_factory.mktemp("dual") / "enc", TINY, seed=7)


def _lines(path: Path) -> list[str]:
    """Lines split on newline only (``str.splitlines`` also splits on U+2028 and friends)."""
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


def _weights(directory: Path) -> dict[str, torch.Tensor]:
    return torch.load(directory / "model.pt", weights_only=True)


def _same_weights(a: Path, b: Path) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_tiny_training_writes_a_loadable_encoder(tiny_encoder: Path, tiny_data) -> None:
    manifest = json.loads((tiny_encoder / "encoder.json").read_text())
    assert manifest["kind"] == "dual" and manifest["dim"] == 16 and manifest["langs"] == ["de", "en"]
    assert set(manifest["files"].values()) == {"model.pt", "spm.model", "config.json"}
    info = manifest["info"]
    assert info["train_pairs"] == 400 and info["steps"] == 2 * (400 // 32) and info["stopped_by"] == "epochs"
    assert info["pairs_seen"] == info["steps"] * 32 and math.isfinite(info["final_loss"])
    ckpt = torch.load(tiny_encoder / "checkpoints" / "last.pt", weights_only=True)
    assert ckpt["step"] == info["steps"]

    enc = load_encoder(tiny_encoder)
    assert isinstance(enc, SentenceEncoder) and enc.kind == "dual" and enc.dim == 16
    sents = _lines(tiny_data[0].src)[:50] + ["", "Hallo!"]
    emb = enc.encode(sents, "de")
    assert emb.shape == (52, 16) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(emb, enc.encode(sents, "de"))
    assert np.array_equal(emb, enc.encode(sents, "en"))                 # one encoder for all languages
    assert np.allclose(enc.encode(sents[3:4], "de"), emb[3:4], atol=1e-6)  # batching does not matter
    assert enc.encode([], "de").shape == (0, 16)


def test_tampered_model_is_refused(tiny_encoder: Path, tmp_path: Path) -> None:
    bad = tmp_path / "enc"
    shutil.copytree(tiny_encoder, bad)
    w = _weights(bad)
    key = next(iter(w))
    w[key] = w[key] + 1.0
    torch.save(w, bad / "model.pt")
    with pytest.raises(EncoderError, match="SHA-256"):
        load_encoder(bad)


def test_same_seed_gives_identical_weights(tiny_encoder: Path, tiny_data, tmp_path: Path) -> None:
    again = dual.train(tiny_data, tmp_path / "again", TINY, seed=7)
    assert (again / "spm.model").read_bytes() == (tiny_encoder / "spm.model").read_bytes()
    assert _same_weights(again, tiny_encoder)
    other = dual.train(tiny_data, tmp_path / "other", {**TINY, "epochs": 1}, seed=8)
    assert not torch.equal(_weights(other)["out.weight"], _weights(tiny_encoder)["out.weight"])


def test_resume_continues_from_checkpoint(tiny_encoder: Path, tiny_data, tmp_path: Path, caplog) -> None:
    out = tmp_path / "enc"
    dual.train(tiny_data, out, {**TINY, "max_steps": 5}, seed=7)
    info = json.loads((out / "encoder.json").read_text())["info"]
    assert info["steps"] == 5 and info["stopped_by"] == "max_steps"
    load_encoder(out)                                                      # an interrupted run is usable
    assert torch.load(out / "checkpoints" / "last.pt", weights_only=True)["step"] == 5

    with caplog.at_level("INFO", logger="marginmine.encoders.dual_train"):
        dual.train(tiny_data, out, TINY, seed=7)
    assert "resuming" in caplog.text and "at step 5 " in caplog.text
    info = json.loads((out / "encoder.json").read_text())["info"]
    assert info["steps"] == 2 * (400 // 32) and info["stopped_by"] == "epochs"
    assert _same_weights(out, tiny_encoder)                               # same as an uninterrupted run

    with pytest.raises(EncoderError, match="lr"):
        dual.train(tiny_data, out, {**TINY, "lr": 0.01}, seed=7)


def test_scheduled_run_resumes_identically_and_keeps_its_end(tiny_data, tmp_path: Path, monkeypatch,
                                                             caplog) -> None:
    sched = {**TINY, "lr": 0.01, "lr_schedule": "linear", "warmup_steps": 3, "max_steps": 20}
    whole = dual.train(tiny_data, tmp_path / "whole", sched, seed=7)
    constant = dual.train(tiny_data, tmp_path / "constant", {**TINY, "lr": 0.01, "max_steps": 20}, seed=7)
    assert not _same_weights(whole, constant)                             # the schedule is applied

    # stop mid-schedule through the time budget: a clock that jumps after a number of readings
    out, calls = tmp_path / "parts", iter(range(10**6))
    monkeypatch.setattr(dual_train.time, "monotonic", lambda: 0.0 if next(calls) < 20 else 1e9)
    dual.train(tiny_data, out, sched, seed=7, max_minutes=1.0)
    monkeypatch.undo()
    stopped = json.loads((out / "encoder.json").read_text())["info"]
    assert stopped["stopped_by"] == "max_minutes" and 3 < stopped["steps"] < 20   # past the warm-up
    dual.train(tiny_data, out, sched, seed=7)
    assert _same_weights(out, whole)
    with pytest.raises(EncoderError, match="decays to 0 at max_steps"):  # the decay's end is fixed
        dual.train(tiny_data, out, {**sched, "max_steps": 30}, seed=7)
    with pytest.raises(EncoderError, match="warmup_steps"):
        dual_train.resolve_params({**sched, "warmup_steps": 20})
    random_init = dual.train(tiny_data, tmp_path / "random", {**sched, "max_steps": 0}, seed=7)   # the twin
    assert json.loads((random_init / "encoder.json").read_text())["info"]["steps"] == 0
    with caplog.at_level("WARNING", logger="marginmine.encoders.dual_train"):
        dual.train(tiny_data, tmp_path / "short", {**sched, "epochs": 1}, seed=7)   # 12 steps < 20
    assert "will not decay to 0" in caplog.text


def test_time_budget_still_writes_an_encoder(tiny_data, tmp_path: Path) -> None:
    out = dual.train(tiny_data, tmp_path / "enc", TINY, seed=7, max_minutes=1e-6)
    info = json.loads((out / "encoder.json").read_text())["info"]
    assert info["stopped_by"] == "max_minutes" and info["steps"] == 0
    assert load_encoder(out).encode(["Hallo!"], "de").shape == (1, 16)


@pytest.mark.parametrize("arch", ["transformer", "bilstm", "bide"])
def test_other_architectures_train_and_encode(arch: str, tiny_data, tmp_path: Path) -> None:
    out = dual.train(tiny_data, tmp_path / arch, {**TINY, "arch": arch, "epochs": 1, "layers": 1}, seed=7)
    assert json.loads((out / "config.json").read_text())["arch"] == arch
    enc = load_encoder(out)
    sents = ["Hallo!", "", "Das ist ein ziemlich langer Satz mit vielen verschiedenen Wörtern darin."]
    emb = enc.encode(sents, "de")
    assert emb.shape == (3, 16) and np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    for i, s in enumerate(sents):                                         # padding does not change a sentence
        assert np.allclose(enc.encode([s], "de")[0], emb[i], atol=1e-5)


def test_the_untrained_twin_is_the_trainers_own_zero_step_model(tiny_data, tiny_encoder: Path, tmp_path: Path) -> None:
    """train-encoder --untrained (the workflow's random-init baseline): the trainer builds the same
    subwords and network and takes no step - the model of max_steps 0, not the trained one."""
    twin = dual.train(tiny_data, tmp_path / "twin", TINY, seed=7, untrained=True)
    zero = dual.train(tiny_data, tmp_path / "zero", {**TINY, "max_steps": 0}, seed=7)
    assert (twin / "model.pt").read_bytes() == (zero / "model.pt").read_bytes()
    assert (twin / "spm.model").read_bytes() == (tiny_encoder / "spm.model").read_bytes()
    assert (twin / "model.pt").read_bytes() != (tiny_encoder / "model.pt").read_bytes()


def test_forward_only_loss_is_eq7_and_both_directions_eq7_plus_eq8() -> None:
    """Yang et al. (2019): Eq. 7 ranks each source's translation among the batch's targets with an
    additive margin; Eq. 8 the same from the targets; BiDE+AM averages both (directions 2)."""
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(6, 8, generator=g), dim=1)
    y = torch.nn.functional.normalize(torch.randn(6, 8, generator=g), dim=1)
    s, m = 20.0, 0.3
    sim = x @ y.T

    def eq7(sim: torch.Tensor) -> float:
        total = 0.0
        for i in range(len(sim)):
            pos = torch.exp(s * (sim[i, i] - m))
            total -= float(torch.log(pos / (pos + torch.exp(s * sim[i]).sum() - torch.exp(s * sim[i, i]))))
        return total / len(sim)

    assert float(dual_model.in_batch_loss(x, y, s, m, directions=1)) == pytest.approx(eq7(sim), rel=1e-5)
    assert float(dual_model.in_batch_loss(x, y, s, m)) == pytest.approx((eq7(sim) + eq7(sim.T)) / 2, rel=1e-5)


def test_forward_only_training_keeps_the_sides(tiny_data, tmp_path: Path) -> None:
    """directions 1 trains x->y only (the DE of the paper when margin is 0): a different model from
    the default BiDE; an unknown value is refused."""
    one = dual.train(tiny_data, tmp_path / "one", {**TINY, "directions": 1, "max_steps": 3}, seed=7)
    two = dual.train(tiny_data, tmp_path / "two", {**TINY, "max_steps": 3}, seed=7)
    assert (one / "model.pt").read_bytes() != (two / "model.pt").read_bytes()
    with pytest.raises(EncoderError, match="directions must be 1"):
        dual.train(tiny_data, tmp_path / "three", {**TINY, "directions": 3}, seed=7)


def test_a_trained_encoder_is_reused_by_the_trained_kind_and_embeds_identically(tiny_encoder, tmp_path) -> None:
    """``kind: trained`` (encoders/trained.py) places another experiment's finished encoder: the
    copy loads with the original kind, has its identity, and embeds byte for byte as it does; a
    modified file, another identity pin, a twin request and a missing path are refused."""
    import shutil

    from marginmine.encoders import kind_module
    from marginmine.encoders.base import encoder_identity

    trained = kind_module("trained")
    sents = ["Der Hund schläft.", "Wir gehen morgen ins Kino.", "Das ist nicht wahr."]
    out = trained.train([], tmp_path / "copy", {"path": str(tiny_encoder),
                                                "identity": encoder_identity(tiny_encoder)})
    assert encoder_identity(out) == encoder_identity(tiny_encoder)
    a = load_encoder(tiny_encoder).encode(sents, "de")
    b = load_encoder(out).encode(sents, "de")
    assert a.tobytes() == b.tobytes()
    with pytest.raises(EncoderError, match="differs from params.identity"):
        trained.train([], tmp_path / "c2", {"path": str(tiny_encoder), "identity": "0" * 64})
    with pytest.raises(EncoderError, match="no random-init twin"):
        trained.train([], tmp_path / "c3", {"path": str(tiny_encoder)}, untrained=True)
    with pytest.raises(EncoderError, match="not found"):
        trained.train([], tmp_path / "c4", {"path": str(tmp_path / "nowhere")})
    with pytest.raises(EncoderError, match="unknown key"):
        trained.train([], tmp_path / "c5", {"path": str(tiny_encoder), "pth": "x"})
    bad = tmp_path / "bad"
    shutil.copytree(tiny_encoder, bad)
    victim = next(p for p in bad.iterdir() if p.is_file() and p.name != "encoder.json")
    victim.write_bytes(victim.read_bytes() + b"x")
    with pytest.raises(EncoderError, match="SHA-256 differs"):
        trained.train([], tmp_path / "c6", {"path": str(bad)})
