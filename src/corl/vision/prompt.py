"""A prompt with images: what a rollout engine samples from for a vision-language model."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImagePrompt:
    """A prompt with images: `text` is the processor's chat prompt holding one image
    placeholder per image (corl.vision.chat_prompt); images are anything
    corl.vision.load_image takes (a path, a PIL image, {"bytes", "path"})."""

    text: str
    images: tuple = ()
