"""Tiny VL families: build, save, reload through the HF auto classes, forward and generate with images,
and log-probs of the update's forward pass equal to generate's (what the trainer relies on)."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

from corl.rollout.base import completion_mask_from
from corl.studies.tiny_vl.families import build_vl_family, load_vl, save_vl
from corl.studies.tiny_vl.task import make_split
from corl.vision.inputs import build_inputs, chat_prompt
from corl.vision.logprobs import generate_with_images, vision_sequence_logprobs
from corl.vision.processing import ImageOnlyQwen2VLProcessor, load_processor

FAMILIES = ("qwen2vl-bpe", "llava-siglip-char")
HAS_TORCHVISION = importlib.util.find_spec("torchvision") is not None


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory):
    model, processor = build_vl_family(request.param)
    path = save_vl(model, processor, tmp_path_factory.mktemp(request.param))
    return request.param, model, processor, path


@pytest.fixture(scope="module")
def rows():
    return make_split("validation", 4, seed=3)


def _batch(processor, rows):
    return build_inputs(processor, [chat_prompt(processor, r["problem"], 1) for r in rows], [r["images"] for r in rows])


def test_reload_through_auto_classes_gives_the_same_model_and_tokens(family, rows):
    name, model, processor, path = family
    loaded = AutoModelForImageTextToText.from_pretrained(path, attn_implementation="eager").eval()
    assert type(loaded) is type(model)
    _, reloaded = load_vl(path)
    # The tokenizer as AutoTokenizer rebuilds it (a qwen2_vl dir loads Qwen2Tokenizer) splits text as trained.
    tok = AutoTokenizer.from_pretrained(path)
    for r in rows:
        text = chat_prompt(processor, r["problem"], 1) + r["solution"]
        assert tok.encode(text, add_special_tokens=False) == processor.tokenizer.encode(text, add_special_tokens=False)
    batch, again = _batch(processor, rows), _batch(reloaded, rows)
    assert torch.equal(batch.input_ids, again.input_ids)
    with torch.no_grad():
        assert torch.equal(model(**batch.model_kwargs()).logits, loaded(**again.model_kwargs()).logits)
    config = json.loads((path / "processor_config.json").read_text())
    assert config["processor_class"] == {"qwen2vl-bpe": "Qwen2VLProcessor", "llava-siglip-char": "LlavaProcessor"}[name]


def test_llava_directory_loads_with_plain_auto_processor(family):
    name, _, _, path = family
    if name != "llava-siglip-char":
        pytest.skip("LLaVA only")
    assert type(AutoProcessor.from_pretrained(path)).__name__ == "LlavaProcessor"


@pytest.mark.skipif(HAS_TORCHVISION, reason="the fallback is only needed without torchvision")
def test_qwen2vl_auto_processor_needs_torchvision_and_load_processor_falls_back(family):
    name, _, _, path = family
    if name != "qwen2vl-bpe":
        pytest.skip("Qwen2-VL only")
    with pytest.raises(ImportError, match="[Tt]orchvision"):
        AutoProcessor.from_pretrained(path)
    assert isinstance(load_processor(path), ImageOnlyQwen2VLProcessor)


@pytest.mark.skipif(not HAS_TORCHVISION, reason="needs torchvision for Qwen2-VL's video processor")
def test_qwen2vl_directory_loads_with_plain_auto_processor_where_torchvision_exists(family):
    name, _, _, path = family
    if name == "qwen2vl-bpe":
        assert type(AutoProcessor.from_pretrained(path)).__name__ == "Qwen2VLProcessor"


def test_image_placeholders_expand_to_the_towers_token_counts(family):
    name, _, processor, _ = family
    # A 64x32 image: Qwen2-VL keeps its size (a multiple of patch 8 * merge 2): grid (1, 4, 8)
    # = 32 patches of 3*2*8*8 = 384 values, merged 2x2 into 8 tokens; SigLIP resizes it to
    # 48x48: (48/8)^2 = 36 tokens.
    batch = build_inputs(processor, [chat_prompt(processor, "x=?", 1)], [[Image.new("RGB", (64, 32), "white")]])
    image_tokens = int((batch.input_ids == processor.image_token_id).sum())
    if name == "qwen2vl-bpe":
        assert image_tokens == 8
        assert batch.image_inputs["image_grid_thw"].tolist() == [[1, 4, 8]]
        assert tuple(batch.patch_inputs["pixel_values"].shape) == (32, 384)
        assert batch.token_inputs["mm_token_type_ids"].sum().item() == 8
    else:
        assert image_tokens == 36
        assert tuple(batch.image_inputs["pixel_values"].shape) == (1, 3, 48, 48)


def test_the_image_changes_the_logits(family, rows):
    _, model, processor, _ = family
    batch = _batch(processor, rows[:1])
    # Same size, different content (an inverted copy): only the vision path can tell them apart.
    inverted = Image.eval(rows[0]["images"][0], lambda v: 255 - v)
    other = build_inputs(processor, [chat_prompt(processor, rows[0]["problem"], 1)], [[inverted]])
    with torch.no_grad():
        a, b = model(**batch.model_kwargs()).logits, model(**other.model_kwargs()).logits
    assert a.shape == b.shape
    assert (a[0, -1] - b[0, -1]).abs().max() > 1e-4


@pytest.mark.parametrize("sample", [False, True])
def test_forward_logprobs_equal_generate_scores(family, rows, sample):
    _, model, processor, _ = family
    # 4 prompts with images of different sizes (Qwen2-VL: different token counts, so left
    # padding differs per row), 2 samples each: the layout of a rollout.
    batch = _batch(processor, rows).repeat_interleave(2)
    torch.manual_seed(0)
    completion, logits = generate_with_images(model, batch, do_sample=sample, max_new_tokens=10, temperature=1.0, top_p=1.0)
    mask = completion_mask_from(completion, [processor.tokenizer.eos_token_id])  # [N, C]
    expected = torch.log_softmax(logits.float(), -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)  # [N, C]
    with torch.no_grad():
        got = vision_sequence_logprobs(model, batch, completion, mask)  # [N, C]
    assert got.shape == completion.shape == (8, completion.shape[1])
    assert torch.allclose(got * mask, expected * mask, atol=1e-5)
    # A minibatch of rollout rows, rebuilt from the prompt-level inputs (rows // K), scores the same.
    prompts = _batch(processor, rows)
    picked = torch.tensor([5, 0, 3])
    with torch.no_grad():
        part = vision_sequence_logprobs(model, prompts.select(picked // 2), completion[picked], mask[picked])
    assert torch.allclose(part * mask[picked], got[picked] * mask[picked], atol=1e-5)


def test_image_placeholders_are_never_generated(family):
    _, model, processor, path = family
    # A sampled placeholder would make the next forward count one image token too many.
    assert processor.image_token_id in model.generation_config.suppress_tokens
    loaded, _ = load_vl(path)
    assert loaded.generation_config.suppress_tokens == model.generation_config.suppress_tokens
