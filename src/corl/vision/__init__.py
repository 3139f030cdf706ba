"""Vision-language agents (paper: VLMs trained with Co-RL on image math problems): the parts the trainer uses.

    corl.studies.tiny_vl.families    tiny random Qwen2-VL-style and LLaVA/SigLIP-style models + processors, built offline
    corl.vision.prompt      ImagePrompt: a prompt with images, what an engine samples from
    corl.vision.processing  load_processor (AutoProcessor, or Qwen2-VL's image-only processor without torchvision)
    corl.vision.inputs      load_image, chat_prompt, build_inputs -> VisionInputs (select / repeat / model_kwargs)
    corl.vision.logprobs    vision_sequence_logprobs (the update's forward), generate_with_images
    corl.studies.tiny_vl.task        a synthetic image task (a number drawn in an image, arithmetic in the text)
    corl.studies.tiny_vl.pretrain    supervised pretraining of the tiny VL families on that task
    corl.vision.datasets    local loaders for open-r1 multimodal, MMR1, MathVista, MathVerse, MathVision, We-Math

How the trainer uses them (corl.trainer, corl.rollout, corl.models.load_agent_policy): docs/vision.md. Submodules are imported on use.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "ImagePrompt": "prompt",
    "load_processor": "processing",
    "VisionInputs": "inputs",
    "build_inputs": "inputs",
    "chat_prompt": "inputs",
    "load_image": "inputs",
    "vision_sequence_logprobs": "logprobs",
    "generate_with_images": "logprobs",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"corl.vision.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'corl.vision' has no attribute {name!r}")
