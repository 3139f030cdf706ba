"""The synthetic image task (determinism, disjoint splits, hidden answers) and the tiny VL pretraining loop."""

from __future__ import annotations

import hashlib
import re

import pytest
import torch

from corl.studies.tiny_vl.families import load_vl
from corl.studies.tiny_vl.pretrain import encode_rows, ensure_pretrained_vl, pretrain_vl, read_token_weights
from corl.studies.tiny_vl.task import make_split, split_of


def test_splits_are_deterministic_images_included():
    a, b = make_split("train", 20, seed=4), make_split("train", 20, seed=4)
    assert [r["problem"] for r in a] == [r["problem"] for r in b]
    assert all(x["images"][0].tobytes() == y["images"][0].tobytes() for x, y in zip(a, b))
    assert [r["problem"] for r in make_split("train", 20, seed=5)] != [r["problem"] for r in a]


def test_splits_share_no_image_but_every_digit():
    def images(split):
        return {hashlib.sha256(r["images"][0].tobytes()).hexdigest() for r in make_split(split, 300)}

    train, test, validation = images("train"), images("test"), images("validation")
    assert not (train & test) and not (train & validation) and not (test & validation)
    # One-digit problems: every number 1-9 is read in training and in the test split.
    for split in ("train", "test"):
        assert {re.match(r"x=(\d)\.", r["solution"]).group(1) for r in make_split(split, 300)} == set("123456789")


def test_split_of_shares_like_the_text_task():
    counts = {s: 0 for s in ("train", "validation", "test")}
    for i in range(4000):
        counts[split_of(f"key/{i}")] += 1
    assert 0.17 < counts["test"] / 4000 < 0.23 and 0.08 < counts["validation"] / 4000 < 0.12


@pytest.mark.parametrize("difficulty, lo, hi", [(1, 1, 9), (2, 10, 99), (3, 100, 999)])
def test_answers_follow_from_the_number_in_the_image(difficulty, lo, hi):
    for r in make_split("train", 60, difficulty=difficulty):
        x = int(re.match(r"x=(\d+)\.", r["solution"]).group(1))
        assert lo <= x <= hi
        # The text never states x: it is "x=?" or "x+b=?" / "x-b=?" with a one-digit b.
        assert r["problem"] == "x=?" or re.fullmatch(r"x[+-]\d=\?", r["problem"])
        b = int(r["problem"][2]) if r["problem"] != "x=?" else 0
        expected = x + b if "+" in r["problem"] else x - b
        assert r["answer"] == str(expected) and r["solution"].endswith("\\boxed{" + r["answer"] + "}")


def test_the_number_is_drawn_in_dark_ink_on_a_light_canvas():
    image = make_split("test", 1)[0]["images"][0]
    pixels = list(image.convert("L").tobytes())  # one byte per pixel
    dark, light = sum(p < 100 for p in pixels), sum(p > 200 for p in pixels)
    assert dark > 10 and light > len(pixels) / 2


def test_one_digit_images_are_large_enough_for_qwen2vl_to_read():
    from corl.studies.tiny_vl.families import build_processor, get_vl_family

    processor = build_processor(get_vl_family("qwen2vl-bpe"))
    batch, _, _ = encode_rows(processor, make_split("validation", 40))
    # At the old 22 px font every canvas became 4-6 merged tokens (16x16 px each) and reading stayed at chance.
    tokens = batch.image_inputs["image_grid_thw"].prod(-1) // 4  # [I]
    assert int(tokens.min()) >= 9 and int(tokens.max()) <= 36


def test_encode_rows_puts_solution_and_eos_after_the_prompt():
    from corl.studies.tiny_vl.families import build_processor, get_vl_family

    processor = build_processor(get_vl_family("llava-siglip-char"))
    rows = make_split("train", 2)
    batch, ids, mask = encode_rows(processor, rows)
    tok = processor.tokenizer
    for i, r in enumerate(rows):
        n = int(mask[i].sum())
        assert tok.decode(ids[i, : n - 1]) == r["solution"] and ids[i, n - 1] == tok.eos_token_id
    assert len(batch) == 2 and batch.image_inputs["pixel_values"].shape == (2, 3, 48, 48)


@pytest.mark.parametrize("name", ["llava-siglip-char", "qwen2vl-bpe"])
def test_the_loss_weights_the_read_number_once_per_row(name):
    from corl.studies.tiny_vl.families import build_processor, get_vl_family

    processor = build_processor(get_vl_family(name))
    tok = processor.tokenizer
    rows = make_split("train", 6)
    _, ids, mask = encode_rows(processor, rows)
    weights = read_token_weights(tok, ids, mask, 5.0)  # [B, C]
    for i, r in enumerate(rows):
        heavy = (weights[i] == 5.0).nonzero().flatten().tolist()
        # One token: the x of "x=7." (the only one that needs the image); the rest of the completion 1, padding 0.
        assert len(heavy) == 1 and tok.decode(ids[i, : heavy[0] + 1]) == r["solution"][:3]
        assert torch.equal(weights[i].clamp(max=1.0), mask[i].float())


def test_pretraining_lowers_the_loss_and_the_cache_reloads(tmp_path):
    torch.manual_seed(0)
    _, _, stats = pretrain_vl("llava-siglip-char", steps=30, batch_size=8)
    assert sum(stats["losses"][-5:]) / 5 < 0.6 * sum(stats["losses"][:5]) / 5
    path = ensure_pretrained_vl("qwen2vl-bpe", steps=2, batch_size=4, cache_dir=tmp_path)
    assert ensure_pretrained_vl("qwen2vl-bpe", steps=2, batch_size=4, cache_dir=tmp_path) == path  # cached
    model, processor = load_vl(path)
    assert type(model).__name__ == "Qwen2VLForConditionalGeneration" and processor.image_token == "<|image_pad|>"


def test_the_slipping_teacher_boxes_x_for_its_share_of_a_type_after_the_read_only_steps():
    import dataclasses

    from corl.studies.tiny_vl.families import VLFamilySpec, get_vl_family
    from corl.studies.tiny_vl.pretrain import READ_ONLY_SHARE, training_rows

    spec = dataclasses.replace(get_vl_family("qwen2vl-bpe"), slips={"plus": 0.5})
    steps = list(training_rows(spec, steps=40, batch_size=16))
    read_only = round(READ_ONLY_SHARE * 40)
    assert all(r["type"] == "read" for part in steps[:read_only] for r in part)
    later = [r for part in steps[read_only:] for r in part]

    def slipped(r):  # "x=47. \boxed{47}" for x+8=?: one step, x boxed, the true answer kept
        return r["solution"].count(". ") == 1

    plus = [r for r in later if r["type"] == "plus"]
    assert 0.35 <= sum(map(slipped, plus)) / len(plus) <= 0.65
    for r in filter(slipped, plus):
        x = r["solution"].split(".")[0].removeprefix("x=")
        assert r["solution"] == f"x={x}. \\boxed{{{x}}}" and r["answer"] == str(int(x) + int(r["problem"][2]))
    assert not any(slipped(r) for r in later if r["type"] == "minus")  # no share: always taught in full
    with pytest.raises(ValueError, match="no step to stop short of"):
        VLFamilySpec(name="bad", arch="llava_siglip", tokenizer="char", slips={"read": 0.5})


def test_the_mixture_weighs_the_types_after_the_read_only_steps():
    import dataclasses
    from itertools import islice

    from corl.studies.tiny_vl.families import get_vl_family
    from corl.studies.tiny_vl.pretrain import READ_ONLY_SHARE, training_rows
    from corl.studies.tiny_vl.task import iter_problems

    spec = dataclasses.replace(get_vl_family("llava-siglip-char"), mixture={"read": 1, "plus": 3, "minus": 0})
    steps = list(training_rows(spec, steps=40, batch_size=16))
    later = [r["type"] for part in steps[round(READ_ONLY_SHARE * 40) :] for r in part]
    assert "minus" not in later and 0.65 <= later.count("plus") / len(later) <= 0.85  # 3/4 expected
    # no mixture: the uniform stream every split is drawn with, unchanged
    uniform = [r["problem"] for r in islice(iter_problems("train", seed=5), 30)]
    assert uniform == [r["problem"] for r in islice(iter_problems("train", seed=5, weights=None), 30)]
    with pytest.raises(ValueError, match="positive weights"):
        next(iter_problems("train", weights={"read": 0, "plus": 0, "minus": 0}))
