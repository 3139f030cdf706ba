"""Batched model inputs of (prompt, images) rows, for rollouts and for the update's forward pass.

A processor's output mixes three layouts, and a rollout must repeat and slice all of them
consistently when it turns B prompts into N = B * K sequences and a minibatch picks rows:

    per sequence   input_ids, attention_mask, mm_token_type_ids   [B, P] (token-aligned)
    per image      image_grid_thw [I, 3] (Qwen2-VL), pixel_values [I, 3, S, S] (LLaVA/SigLIP)
    per patch      pixel_values [sum of patches, D] (Qwen2-VL: every image's flattened
                   patches concatenated, image i owning grid_thw[i].prod() rows)

`VisionInputs` keeps the three apart, with the bookkeeping that maps them onto each other
(`images_per_row` [B], `patches_per_image` [I]); `select(rows)` gathers any rows, repeats
included, so `select(arange(B).repeat_interleave(K))` is the rollout's N sequences and
`select(minibatch_rows // K)` rebuilds a minibatch's inputs from prompt-level ones without
ever storing K copies of the pixels. `model_kwargs(completion_ids, completion_mask)` is
what the forward pass takes: token-aligned inputs extended over the completion (its tokens
are text: mm_token_type_ids 0), images and patches passed through.

Images are loaded by `load_image` from a path, a PIL image, or an HF `datasets.Image`
feature value ({"bytes", "path"}), converted to RGB and capped at `max_side` pixels on the
long side (1,024 by default, as the reference implementation does).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from PIL import Image

from corl.vision.prompt import ImagePrompt

DEFAULT_MAX_SIDE = 1024
TOKEN_KEYS = ("mm_token_type_ids", "token_type_ids")  # [B, P], zero on text tokens
IMAGE_KEYS = ("image_grid_thw", "image_sizes")  # one row per image
PACKED_BY = {"pixel_values": "image_grid_thw"}  # patch-packed key -> the per-image grid that counts its rows


def load_image(source, max_side: int | None = DEFAULT_MAX_SIDE, base_dir: str | Path | None = None) -> Image.Image:
    """An RGB PIL image from a path, PIL image or {"bytes", "path"} dict, long side capped at `max_side`.

    Relative paths resolve against `base_dir` (a dataset file's folder) when given.
    """
    if isinstance(source, Image.Image):
        image = source
    elif isinstance(source, (str, Path)):
        path = Path(source)
        if base_dir is not None and not path.is_absolute():
            path = Path(base_dir) / path
        image = Image.open(path)
    elif isinstance(source, dict) and (source.get("bytes") or source.get("path")):
        # datasets.Image features decode to this dict with decode=False; bytes win over a path.
        if source.get("bytes"):
            image = Image.open(io.BytesIO(source["bytes"]))
        else:
            return load_image(source["path"], max_side, base_dir)
    else:
        raise TypeError(f"not an image: {type(source).__name__} (want a path, a PIL image or a dict with bytes/path)")
    image.load()
    image = image.convert("RGB")
    if max_side is not None and max(image.size) > max_side:
        scale = max_side / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.BICUBIC)
    return image


def chat_prompt(processor, problem: str, num_images: int) -> str:
    """The prompt text of a problem with `num_images` images in front (the processor's chat template)."""
    content = [{"type": "image"} for _ in range(num_images)] + [{"type": "text", "text": problem}]
    return processor.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False)


def image_prompt(processor, text: str, images) -> ImagePrompt:
    """A rollout prompt with images: `text` in the processor's chat template, one placeholder
    per image in front (`images`: a row's list, None or empty for a text-only row)."""
    images = tuple(images or ())
    return ImagePrompt(chat_prompt(processor, text, len(images)), images)


@dataclass
class VisionInputs:
    """Left-padded prompts with their images, in three layouts (see the module doc). B rows."""

    input_ids: torch.Tensor  # [B, P] left-padded
    attention_mask: torch.Tensor  # [B, P]
    images_per_row: torch.Tensor  # [B] long
    token_inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> [B, P]
    image_inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> [I, ...]
    patch_inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> [sum(patches_per_image), ...]
    patches_per_image: torch.Tensor | None = None  # [I] long; None without patch inputs

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def prompt_length(self) -> int:  # P
        return self.input_ids.shape[1]

    def select(self, rows: torch.Tensor | Sequence[int]) -> VisionInputs:
        """The inputs of `rows` (any order, repeats allowed), images and patches gathered to match."""
        rows = torch.as_tensor(rows, dtype=torch.long)  # [R]
        counts = self.images_per_row[rows]  # [R]
        first_image = torch.cumsum(self.images_per_row, 0) - self.images_per_row  # [B] index of each row's first image
        images = _ranges(first_image[rows], counts)  # [I'] image indices, row by row
        out = VisionInputs(
            input_ids=self.input_ids[rows],
            attention_mask=self.attention_mask[rows],
            images_per_row=counts,
            token_inputs={k: v[rows] for k, v in self.token_inputs.items()},
            image_inputs={k: v[images] for k, v in self.image_inputs.items()},
        )
        if self.patches_per_image is not None:
            first_patch = torch.cumsum(self.patches_per_image, 0) - self.patches_per_image  # [I]
            patches = _ranges(first_patch[images], self.patches_per_image[images])  # [sum patches of I']
            out.patch_inputs = {k: v[patches] for k, v in self.patch_inputs.items()}
            out.patches_per_image = self.patches_per_image[images]
        return out

    def repeat_interleave(self, k: int) -> VisionInputs:
        """Each row K times in a row: row b*K + j is prompt b (the rollout's grouping)."""
        return self.select(torch.arange(len(self)).repeat_interleave(k))

    def model_kwargs(self, completion_ids: torch.Tensor | None = None, completion_mask: torch.Tensor | None = None) -> dict:
        """Keyword arguments of the model's forward (and of `generate` without a completion).

        Args:
            completion_ids: [B, C] tokens after the prompt (right-padded), or None.
            completion_mask: [B, C] 1 on real completion tokens (default: all ones).
        """
        kwargs = {**self.image_inputs, **self.patch_inputs}
        if completion_ids is None:
            return {"input_ids": self.input_ids, "attention_mask": self.attention_mask, **self.token_inputs, **kwargs}
        if completion_mask is None:
            completion_mask = torch.ones_like(completion_ids)
        kwargs["input_ids"] = torch.cat([self.input_ids, completion_ids], 1)  # [B, P + C]
        kwargs["attention_mask"] = torch.cat([self.attention_mask, completion_mask.to(self.attention_mask.dtype)], 1)
        for name, value in self.token_inputs.items():  # completion tokens are text: type 0
            kwargs[name] = torch.cat([value, torch.zeros_like(completion_ids, dtype=value.dtype)], 1)
        return kwargs

    def to(self, device) -> VisionInputs:
        def move(d):
            return {k: v.to(device) for k, v in d.items()}

        return VisionInputs(
            input_ids=self.input_ids.to(device), attention_mask=self.attention_mask.to(device),
            images_per_row=self.images_per_row, token_inputs=move(self.token_inputs), image_inputs=move(self.image_inputs),
            patch_inputs=move(self.patch_inputs), patches_per_image=self.patches_per_image,
        )  # fmt: skip


def _ranges(starts: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Concatenation of arange(s, s + n) for each (s, n): [R], [R] -> [sum n]."""
    if lengths.numel() == 0 or int(lengths.sum()) == 0:
        return torch.zeros(0, dtype=torch.long)
    offsets = torch.arange(int(lengths.sum())) - torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
    return torch.repeat_interleave(starts, lengths) + offsets


def build_inputs(
    processor,
    prompts: Sequence[str],
    images: Sequence[Sequence],
    max_side: int | None = DEFAULT_MAX_SIDE,
    base_dir: str | Path | None = None,
) -> VisionInputs:
    """Processor inputs of B prompts (each holding its image placeholders) and their images, left-padded.

    Args:
        prompts: [B] prompt texts, e.g. from `chat_prompt`, one placeholder per image.
        images: [B] lists of images (anything `load_image` takes); a row may have none.
    """
    if len(prompts) != len(images):
        raise ValueError(f"{len(prompts)} prompts but {len(images)} image lists")
    placeholder = processor.image_token
    for i, (prompt, row) in enumerate(zip(prompts, images)):
        if prompt.count(placeholder) != len(row):
            raise ValueError(f"prompt {i} has {prompt.count(placeholder)} {placeholder!r} placeholders but {len(row)} images")
    flat = [load_image(x, max_side, base_dir) for row in images for x in row]
    # A flat list: processors match images to placeholders in order across the batch.
    out = processor(text=list(prompts), images=flat or None, padding=True, padding_side="left", return_tensors="pt")
    return split_processor_output(dict(out), [len(row) for row in images])


def split_processor_output(out: dict[str, torch.Tensor], images_per_row: Sequence[int]) -> VisionInputs:
    """Sort a processor's batched output into the three layouts; unknown keys are an error, not a guess."""
    out = dict(out)
    input_ids, attention_mask = out.pop("input_ids"), out.pop("attention_mask")
    counts = torch.tensor(list(images_per_row), dtype=torch.long)  # [B]
    num_images = int(counts.sum())
    token, image, patch, patches_per_image = {}, {}, {}, None
    for name in TOKEN_KEYS:
        if name in out:
            token[name] = out.pop(name)
    for name in IMAGE_KEYS:
        if name in out:
            image[name] = out.pop(name)
    for name, grid_key in PACKED_BY.items():
        if name in out and grid_key in image:
            patches_per_image = image[grid_key].prod(-1)  # [I]
            patch[name] = out.pop(name)
            if patch[name].shape[0] != int(patches_per_image.sum()):
                raise ValueError(f"{name} has {patch[name].shape[0]} rows, {grid_key} counts {int(patches_per_image.sum())}")
    if "pixel_values" in out:
        image["pixel_values"] = out.pop("pixel_values")
    for name, value in image.items():
        if value.shape[0] != num_images:
            raise ValueError(f"{name} has {value.shape[0]} rows for {num_images} images: not one per image")
    if out:
        raise ValueError(f"processor returned inputs of unknown layout: {sorted(out)}; add them to corl.vision.inputs")
    return VisionInputs(input_ids, attention_mask, counts, token, image, patch, patches_per_image)
