"""Loading a vision-language processor offline, including where the video stack is missing.

transformers 5 builds every Qwen2-VL / Qwen2.5-VL processor with a *video* sub-processor,
and the video processors need torchvision. PyPI's torchvision does not import against the
CPU torch corl's CI uses, so `AutoProcessor.from_pretrained` of any Qwen2-VL directory
raises ImportError there, although images need nothing but the PIL image processor.

`ImageOnlyQwen2VLProcessor` is transformers' own `Qwen2VLProcessor` (its `__call__`,
placeholder expansion and `mm_token_type_ids` unchanged) built from an image processor
and a tokenizer only. It saves a standard Qwen2-VL processor directory (processor_class
"Qwen2VLProcessor"), so where torchvision exists `AutoProcessor` loads the same directory
as the full processor. `load_processor` tries `AutoProcessor` first and falls back to it.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoConfig, AutoProcessor, ProcessorMixin, Qwen2VLProcessor

# Processor classes whose only torchvision need is the video sub-processor (images work without it).
_VIDEO_ONLY_TORCHVISION = {"Qwen2VLProcessor", "Qwen2_5_VLProcessor"}
_QWEN_VL_MODEL_TYPES = {"qwen2_vl", "qwen2_5_vl"}


class ImageOnlyQwen2VLProcessor(Qwen2VLProcessor):
    """`Qwen2VLProcessor` without a video processor: images and text only."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        # Same token attributes Qwen2VLProcessor.__init__ sets; its super().__init__ would
        # type-check a video processor, whose base class is a stub without torchvision.
        self.image_token = getattr(tokenizer, "image_token", "<|image_pad|>")
        self.video_token = getattr(tokenizer, "video_token", "<|video_pad|>")
        self.image_token_id = getattr(tokenizer, "image_token_id", None) or tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = getattr(tokenizer, "video_token_id", None) or tokenizer.convert_tokens_to_ids(self.video_token)
        self.video_processor = None
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    def __call__(self, images=None, text=None, videos=None, **kwargs):
        if videos is not None:
            raise ValueError("ImageOnlyQwen2VLProcessor has no video processor (it needs torchvision)")
        return super().__call__(images=images, text=text, **kwargs)

    def save_pretrained(self, save_directory, push_to_hub: bool = False, **kwargs):
        files = super().save_pretrained(save_directory, push_to_hub=push_to_hub, **kwargs)
        # Name the standard class in both configs, so the directory is an ordinary Qwen2-VL one.
        for name in ("processor_config.json", "tokenizer_config.json"):
            path = Path(save_directory) / name
            if path.is_file():
                data = json.loads(path.read_text())
                if "processor_class" in data:
                    data["processor_class"] = "Qwen2VLProcessor"
                    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        # The video processor config a full Qwen2-VL directory has (AutoProcessor loads it where
        # torchvision exists): the same patching as the images, written by hand since no
        # video processor object can be built here.
        image = self.image_processor
        video = {
            "video_processor_type": "Qwen2VLVideoProcessor",
            "patch_size": image.patch_size,
            "temporal_patch_size": image.temporal_patch_size,
            "merge_size": image.merge_size,
            "size": dict(image.size),
            "image_mean": list(image.image_mean),
            "image_std": list(image.image_std),
        }
        (Path(save_directory) / "video_preprocessor_config.json").write_text(json.dumps(video, indent=2) + "\n")
        return files


def load_processor(path: str | Path):
    """The processor saved in `path` (offline): AutoProcessor, else the image-only Qwen2-VL one.

    The fallback applies only to Qwen2-VL-family directories whose AutoProcessor load failed
    on the missing video stack; any other failure is raised as it is.
    """
    try:
        return AutoProcessor.from_pretrained(path)
    except (ImportError, OSError) as error:  # OSError: a directory saved without a video processor config
        processor_class = _saved_processor_class(Path(path))
        model_type = (
            getattr(AutoConfig.from_pretrained(path), "model_type", None) if (Path(path) / "config.json").is_file() else None
        )
        if processor_class in _VIDEO_ONLY_TORCHVISION or model_type in _QWEN_VL_MODEL_TYPES:
            return ImageOnlyQwen2VLProcessor.from_pretrained(path)
        raise error


def _saved_processor_class(path: Path) -> str | None:
    for name in ("processor_config.json", "tokenizer_config.json"):
        file = path / name
        if file.is_file():
            cls = json.loads(file.read_text()).get("processor_class")
            if cls:
                return cls
    return None
