"""Tiny vision-language families: randomly initialised HF VLMs with their processors, built offline.

Two architectures stand for the paper's two kinds of vision encoder:

    qwen2vl-bpe        Qwen2VLForConditionalGeneration: a native-resolution ViT (2D RoPE, any
                       image size, 2x2 patch merger) feeding a Qwen2 text model with M-RoPE.
                       Its pixel_values are flattened patches of all images concatenated,
                       with image_grid_thw [I, 3] per image. Byte-level BPE tokenizer.
    llava-siglip-char  LlavaForConditionalGeneration: a SigLIP tower at a fixed square size
                       (every image resized to it), an MLP projector and a Llama text model.
                       pixel_values [I, 3, S, S], one per image. Per-character tokenizer.

Both save with `save_pretrained` into ordinary HF directories that
`AutoModelForImageTextToText` and `AutoProcessor` load offline (Qwen2-VL's processor
needs torchvision for its video half; `corl.vision.processing.load_processor` covers the
case where it is missing). The prompt format of both chat templates is
`<image placeholder per image><text>\\n`, the tiny text task's "{problem}\\n" with images in front.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import (
    AutoModelForImageTextToText,
    GenerationConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaProcessor,
    PreTrainedModel,
    Qwen2VLConfig,
    SiglipVisionConfig,
)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer
from corl.vision.processing import ImageOnlyQwen2VLProcessor, load_processor

ARCHS = ("qwen2_vl", "llava_siglip")
MAX_NEW_TOKENS = 32
QWEN_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
LLAVA_IMAGE_TOKEN = "<image>"
SLIP_TYPES = ("plus", "minus")  # the image task's types with a step after reading x

# One template for both families; only the per-image placeholder differs. Messages are
# HF chat messages whose content is a string or a list of {"type": "image"|"text"} parts.
_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}PLACEHOLDER"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '\\n' }}{%- endif -%}"
)


@dataclass(frozen=True)
class VLFamilySpec:
    """Everything that defines one tiny VL family (towers are random; pretraining is corl.studies.tiny_vl.pretrain)."""

    name: str
    arch: str  # "qwen2_vl" | "llava_siglip"
    tokenizer: str  # "bpe" | "char"
    seed: int = 0
    hidden: int = 64  # text model
    layers: int = 2
    heads: int = 4
    ffn: int = 256
    vision_hidden: int = 32
    vision_layers: int = 2
    vision_heads: int = 2
    patch_size: int = 8
    image_size: int = 48  # llava_siglip: the square every image is resized to
    max_pixels: int = 96 * 96  # qwen2_vl: images above this many pixels are shrunk (aspect kept)
    min_pixels: int = 32 * 32  # small images are upscaled to at least 4 merged tokens
    bpe_vocab_size: int = 320
    # Per type, the share of pretraining rows (after the read-only curriculum) taught by the
    # teacher that stops one step short (corl.studies.tiny.task.slipped: "x=47. \\boxed{47}" for
    # x+8=?): the family reads the image and knows the sum, but its majority answer is the slip's.
    slips: dict[str, float] = field(default_factory=dict)
    # Relative frequency of each type in the rows after the read-only curriculum (empty: uniform).
    mixture: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        bad = {t: v for t, v in self.slips.items() if t not in SLIP_TYPES or not 0.0 <= v <= 1.0}
        if bad:
            raise ValueError(
                f"VL family {self.name!r}: slips {bad} must map types of {', '.join(SLIP_TYPES)} to shares in [0, 1] "
                "(a read row has no step to stop short of)"
            )
        if self.arch not in ARCHS:
            raise ValueError(f"VL family {self.name!r}: arch {self.arch!r} is not one of {', '.join(ARCHS)}")
        if self.arch == "qwen2_vl" and self.tokenizer != "bpe":
            # A qwen2_vl directory loads its tokenizer as Qwen2Tokenizer (byte-level BPE), like qwen2.
            raise ValueError(f"VL family {self.name!r}: qwen2_vl needs tokenizer='bpe'")
        if (self.hidden // self.heads) % 4:
            raise ValueError(f"VL family {self.name!r}: head size {self.hidden // self.heads} must divide by 4 (M-RoPE)")


# As the text families (corl.studies.tiny.families), each is weak on one type in the way that a
# peer can fix and a self-reward cannot: it was taught that type mostly (60%) by the teacher that
# stops one step short and boxes x itself, so its majority answer there is the slip, while the
# other family, taught the type in full, answers it well. Qwen2-VL slips on "plus", LLaVA/SigLIP
# on "minus". A peer teaches only if it answers its full type well on any pretraining seed: with a
# uniform mixture and 800 steps, 2 of 6 probe seeds left a teacher right on under half of its type
# greedily (LLaVA's sums 35-42%), and a held-out seed broke the study. Arithmetic three times as
# often as reading after the read-only steps, and 1,000 steps, left none of the same 6 (teachers
# 55-100%). Chosen on the validation split (corl/studies/tiny_vl/probe.py, docs/vision.md).
MIXTURE = {"read": 1.0, "plus": 3.0, "minus": 3.0}
VL_FAMILIES: dict[str, VLFamilySpec] = {
    spec.name: spec
    for spec in (
        VLFamilySpec(name="qwen2vl-bpe", arch="qwen2_vl", tokenizer="bpe", seed=0, slips={"plus": 0.6}, mixture=MIXTURE),
        VLFamilySpec(
            name="llava-siglip-char", arch="llava_siglip", tokenizer="char", seed=1, slips={"minus": 0.6}, mixture=MIXTURE
        ),
    )
}


def get_vl_family(name: str | VLFamilySpec) -> VLFamilySpec:
    if isinstance(name, VLFamilySpec):
        return name
    if name not in VL_FAMILIES:
        raise KeyError(f"unknown tiny VL family {name!r}; choose one of {', '.join(VL_FAMILIES)}")
    return VL_FAMILIES[name]


def with_seed(spec: VLFamilySpec, seed: int) -> VLFamilySpec:
    return dataclasses.replace(spec, name=f"{spec.name}-seed{seed}", seed=seed)


# --- processors -------------------------------------------------------------------------


def _tokenizer(spec: VLFamilySpec, special: tuple[str, ...]):
    """corl's tiny tokenizer (left padding, as rollouts pad) plus the image special tokens."""
    if spec.tokenizer == "char":
        tok = char_tokenizer(padding_side="left")
    else:
        from corl.studies.tiny_vl.task import bpe_corpus  # the image task's texts; imported here to keep the cycle lazy

        tok = bpe_tokenizer(bpe_corpus(), vocab_size=spec.bpe_vocab_size, padding_side="left")
    tok.add_special_tokens({"additional_special_tokens": list(special)})
    return tok


def build_processor(spec: VLFamilySpec):
    """The family's processor: PIL image processor + tiny tokenizer + chat template with the image placeholder."""
    if spec.arch == "qwen2_vl":
        tok = _tokenizer(spec, QWEN_TOKENS)
        images = Qwen2VLImageProcessorPil(
            min_pixels=spec.min_pixels,
            max_pixels=spec.max_pixels,
            patch_size=spec.patch_size,
            temporal_patch_size=2,
            merge_size=2,
        )
        template = _TEMPLATE.replace("PLACEHOLDER", "<|vision_start|><|image_pad|><|vision_end|>")
        return ImageOnlyQwen2VLProcessor(image_processor=images, tokenizer=tok, chat_template=template)
    tok = _tokenizer(spec, (LLAVA_IMAGE_TOKEN,))
    images = SiglipImageProcessorPil(size={"height": spec.image_size, "width": spec.image_size})
    template = _TEMPLATE.replace("PLACEHOLDER", LLAVA_IMAGE_TOKEN)
    # SigLIP has no CLS token: every patch is an image token ("full" strategy, no additional tokens).
    return LlavaProcessor(
        image_processor=images, tokenizer=tok, patch_size=spec.patch_size, vision_feature_select_strategy="full",
        chat_template=template, image_token=LLAVA_IMAGE_TOKEN, num_additional_image_tokens=0,
    )  # fmt: skip


# --- models -----------------------------------------------------------------------------


def _config(spec: VLFamilySpec, tok):
    ids = dict(bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    if spec.arch == "qwen2_vl":
        half = spec.hidden // spec.heads // 2  # rotary frequencies per head, split over (t, h, w)
        section = [half // 4, (half - half // 4) // 2, half - half // 4 - (half - half // 4) // 2]
        text = dict(
            vocab_size=len(tok), hidden_size=spec.hidden, intermediate_size=spec.ffn, num_hidden_layers=spec.layers,
            num_attention_heads=spec.heads, num_key_value_heads=min(2, spec.heads), max_position_embeddings=1024,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": section},
            attention_dropout=0.0, **ids,
        )  # fmt: skip
        vision = dict(
            depth=spec.vision_layers, embed_dim=spec.vision_hidden, hidden_size=spec.hidden, num_heads=spec.vision_heads,
            mlp_ratio=2, patch_size=spec.patch_size, spatial_merge_size=2, temporal_patch_size=2,
        )  # fmt: skip
        token = {t: tok.convert_tokens_to_ids(t) for t in QWEN_TOKENS}
        return Qwen2VLConfig(
            text_config=text, vision_config=vision, image_token_id=token["<|image_pad|>"], video_token_id=token["<|video_pad|>"],
            vision_start_token_id=token["<|vision_start|>"], vision_end_token_id=token["<|vision_end|>"],
            tie_word_embeddings=True, **ids,
        )  # fmt: skip
    vision = SiglipVisionConfig(
        hidden_size=spec.vision_hidden, intermediate_size=2 * spec.vision_hidden, num_hidden_layers=spec.vision_layers,
        num_attention_heads=spec.vision_heads, image_size=spec.image_size, patch_size=spec.patch_size,
    )  # fmt: skip
    text = LlamaConfig(
        vocab_size=len(tok), hidden_size=spec.hidden, intermediate_size=spec.ffn, num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads, num_key_value_heads=spec.heads, max_position_embeddings=1024,
        attention_dropout=0.0, tie_word_embeddings=True, **ids,
    )  # fmt: skip
    return LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=tok.convert_tokens_to_ids(LLAVA_IMAGE_TOKEN),
        vision_feature_select_strategy="full", vision_feature_layer=-1, projector_hidden_act="gelu",
        image_seq_length=(spec.image_size // spec.patch_size) ** 2, tie_word_embeddings=True, **ids,
    )  # fmt: skip


def build_vl_family(name: str | VLFamilySpec) -> tuple[PreTrainedModel, object]:
    """(random model, processor) of a tiny VL family; deterministic in the spec, global RNG untouched."""
    spec = get_vl_family(name)
    processor = build_processor(spec)
    tok = processor.tokenizer
    config = _config(spec, tok)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        # Eager attention: fastest at this size on CPU, and the same kernel in generate and forward.
        model = AutoModelForImageTextToText.from_config(config, attn_implementation="eager")
    model.eval()
    # Image placeholders are never generated: a sampled one would be a text token that the next forward
    # pass counts as an image slot without features ("Image features and image tokens do not match").
    special = QWEN_TOKENS if spec.arch == "qwen2_vl" else (LLAVA_IMAGE_TOKEN,)
    model.generation_config = GenerationConfig(
        bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        max_new_tokens=MAX_NEW_TOKENS, suppress_tokens=tok.convert_tokens_to_ids(list(special)),
    )  # fmt: skip
    return model, processor


def save_vl(model: PreTrainedModel, processor, path: str | Path) -> Path:
    """Model + processor into one directory, loadable by `load_vl` (or the HF auto classes)."""
    path = Path(path)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def load_vl(path: str | Path) -> tuple[PreTrainedModel, object]:
    """(model, processor) from a directory, offline, through AutoModelForImageTextToText / AutoProcessor."""
    model = AutoModelForImageTextToText.from_pretrained(path, attn_implementation="eager")
    model.eval()
    return model, load_processor(path)


def image_token_id(processor) -> int:
    """The id of the token that stands for one image embedding (what the model replaces)."""
    return processor.image_token_id


__all__ = [
    "ARCHS",
    "VL_FAMILIES",
    "VLFamilySpec",
    "build_processor",
    "build_vl_family",
    "get_vl_family",
    "image_token_id",
    "load_vl",
    "save_vl",
    "with_seed",
]
