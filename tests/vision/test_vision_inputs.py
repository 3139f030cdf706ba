"""Images in, batched model inputs out: loading, left padding, and select/repeat across the three layouts."""

from __future__ import annotations

import io
import re

import pytest
import torch
from PIL import Image

from corl.studies.tiny_vl.families import build_processor, get_vl_family
from corl.vision.inputs import build_inputs, chat_prompt, load_image, split_processor_output


@pytest.fixture(scope="module")
def qwen():
    return build_processor(get_vl_family("qwen2vl-bpe"))


@pytest.fixture(scope="module")
def llava():
    return build_processor(get_vl_family("llava-siglip-char"))


def _png(size=(30, 20), colour=(255, 0, 0, 128)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGBA", size, colour).save(buf, format="PNG")
    return buf.getvalue()


def test_load_image_from_every_source_gives_rgb(tmp_path):
    (tmp_path / "a.png").write_bytes(_png())
    from_path = load_image(tmp_path / "a.png")
    from_relative = load_image("a.png", base_dir=tmp_path)
    from_bytes = load_image({"bytes": _png(), "path": None})
    from_dict_path = load_image({"bytes": None, "path": str(tmp_path / "a.png")})
    from_pil = load_image(Image.new("L", (30, 20), 7))
    for image in (from_path, from_relative, from_bytes, from_dict_path, from_pil):
        assert image.mode == "RGB" and image.size == (30, 20)
    assert from_pil.getpixel((0, 0)) == (7, 7, 7)
    with pytest.raises(TypeError, match="not an image"):
        load_image({"bytes": None, "path": None})


def test_load_image_caps_the_long_side_keeping_the_aspect():
    assert load_image(Image.new("RGB", (2048, 1000))).size == (1024, 500)
    assert load_image(Image.new("RGB", (300, 900)), max_side=300).size == (100, 300)
    assert load_image(Image.new("RGB", (800, 600))).size == (800, 600)  # under the cap: untouched
    assert load_image(Image.new("RGB", (2048, 1000)), max_side=None).size == (2048, 1000)


def test_chat_prompt_puts_one_placeholder_per_image_before_the_text(qwen, llava):
    assert chat_prompt(llava, "x+3=?", 2) == "<image><image>x+3=?\n"
    assert chat_prompt(qwen, "x=?", 1) == "<|vision_start|><|image_pad|><|vision_end|>x=?\n"
    assert chat_prompt(qwen, "7+1=?", 0) == "7+1=?\n"


def _rows(processor):
    # Row 0: two images (64x32: 32 patches; 32x32: 16 patches), row 1: none, row 2: one (48x48: 36 patches).
    images = [
        [Image.new("RGB", (64, 32), "white"), Image.new("RGB", (32, 32), "black")],
        [],
        [Image.new("RGB", (48, 48), "gray")],
    ]
    prompts = [chat_prompt(processor, p, len(i)) for p, i in zip(["x+y=?", "5+2=?", "x=?"], images)]
    return prompts, images


def test_qwen2vl_batch_is_left_padded_with_packed_patches(qwen):
    prompts, images = _rows(qwen)
    batch = build_inputs(qwen, prompts, images)
    assert batch.images_per_row.tolist() == [2, 0, 1]
    assert batch.patches_per_image.tolist() == [32, 16, 36]
    assert batch.image_inputs["image_grid_thw"].tolist() == [[1, 4, 8], [1, 4, 4], [1, 6, 6]]
    assert batch.patch_inputs["pixel_values"].shape == (84, 384)  # [32 + 16 + 36, 3 * 2 * 8 * 8]
    # Left padding: every row ends on real tokens; row 1 (no image) is the shortest, padded in front.
    assert batch.attention_mask[:, -1].tolist() == [1, 1, 1]
    assert batch.attention_mask[1, 0] == 0
    # Image tokens per row = patches / 4 (2x2 merge): 8 + 4, 0, 9; mm_token_type_ids marks exactly them.
    assert (batch.input_ids == qwen.image_token_id).sum(1).tolist() == [12, 0, 9]
    assert batch.token_inputs["mm_token_type_ids"].sum(1).tolist() == [12, 0, 9]


def test_select_equals_processing_the_selected_rows(qwen, llava):
    for processor in (qwen, llava):
        prompts, images = _rows(processor)
        batch = build_inputs(processor, prompts, images)
        rows = [2, 0, 0]  # reordered, repeated; keeps the longest row so the padded width is the same
        direct = build_inputs(processor, [prompts[i] for i in rows], [images[i] for i in rows])
        picked = batch.select(rows)
        assert picked.images_per_row.tolist() == [1, 2, 2]
        kw_a, kw_b = picked.model_kwargs(), direct.model_kwargs()
        assert kw_a.keys() == kw_b.keys()
        for key in kw_a:
            assert torch.equal(kw_a[key], kw_b[key]), key


def test_select_gathers_patches_image_by_image(qwen):
    prompts, images = _rows(qwen)
    batch = build_inputs(qwen, prompts, images)
    pixels = batch.patch_inputs["pixel_values"]  # [84, 384]: image 0 rows 0-31, image 1 rows 32-47, image 2 rows 48-83
    picked = batch.select([2, 1, 0])
    assert picked.patches_per_image.tolist() == [36, 32, 16]
    expected = torch.cat([pixels[48:84], pixels[0:32], pixels[32:48]])
    assert torch.equal(picked.patch_inputs["pixel_values"], expected)
    assert picked.image_inputs["image_grid_thw"].tolist() == [[1, 6, 6], [1, 4, 8], [1, 4, 4]]
    empty = batch.select([1])
    assert empty.patch_inputs["pixel_values"].shape == (0, 384) and empty.patches_per_image.tolist() == []


def test_repeat_interleave_is_the_rollout_grouping(llava):
    prompts, images = _rows(llava)
    batch = build_inputs(llava, prompts, images)
    repeated = batch.repeat_interleave(2)
    assert len(repeated) == 6 and repeated.images_per_row.tolist() == [2, 2, 0, 0, 1, 1]
    assert torch.equal(repeated.input_ids, batch.input_ids.repeat_interleave(2, 0))
    pixels = batch.image_inputs["pixel_values"]  # [3, 3, 48, 48]
    assert torch.equal(repeated.image_inputs["pixel_values"], pixels[[0, 1, 0, 1, 2, 2]])


def test_model_kwargs_extend_token_inputs_over_the_completion(qwen):
    prompts, images = _rows(qwen)
    batch = build_inputs(qwen, prompts, images)
    completion = torch.tensor([[5, 6, 1], [7, 1, 0], [8, 9, 10]])  # [3, 3], row 1 padded after EOS (1)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1]])
    kw = batch.model_kwargs(completion, mask)
    p = batch.prompt_length
    assert kw["input_ids"].shape == (3, p + 3) and torch.equal(kw["input_ids"][:, p:], completion)
    assert kw["attention_mask"][:, p:].tolist() == mask.tolist()
    assert kw["mm_token_type_ids"][:, p:].tolist() == [[0, 0, 0]] * 3
    assert torch.equal(kw["mm_token_type_ids"][:, :p], batch.token_inputs["mm_token_type_ids"])


def test_mismatched_placeholders_and_unknown_layouts_are_errors(qwen):
    with pytest.raises(ValueError, match=re.escape("1 '<|image_pad|>' placeholders but 2 images")):
        build_inputs(qwen, [chat_prompt(qwen, "x=?", 1)], [[Image.new("RGB", (32, 32))] * 2])
    out = {
        "input_ids": torch.zeros(1, 3, dtype=torch.long),
        "attention_mask": torch.ones(1, 3),
        "pixel_attention_mask": torch.ones(1, 4),
    }
    with pytest.raises(ValueError, match="unknown layout: \\['pixel_attention_mask'\\]"):
        split_processor_output(out, [0])
    with pytest.raises(ValueError, match="not one per image"):
        split_processor_output(
            {"input_ids": out["input_ids"], "attention_mask": out["attention_mask"], "pixel_values": torch.zeros(2, 3)}, [1]
        )
