"""What the plan knows of an agent's model: its config, built on the meta device (no memory,
no weights read), counted the way corl will hold it.

The config comes from the model's own `config.json` (a local folder), corl's table of the
public configs of the models its own configs name (corl.plan.known_models, offline), the
Hugging Face cache or the hub where reachable, or, for a registered model source (`tiny:` / `tiny-vl:`, corl.studies),
from the source's `config`.
The model is then built on the meta device with transformers' Auto classes
(AutoModelForImageTextToText for a vision-language model) and prepared as corl prepares it
(peft's LoRA adapters through corl.models.add_lora, freeze_vision), so that the parameter
counts are exact: tied weights counted once, adapters on exactly the modules peft picks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from corl.config import AgentConfig, ConfigError, LoRAConfig
from corl.models.sources import split_model_name
from corl.plan.arithmetic import DecoderShape, VisionShape


@dataclass(frozen=True)
class Tensor:
    """One parameter as the plan needs it: size, first dimension (FSDP2 shards it), trainable."""

    numel: int
    first_dim: int
    trainable: bool


@dataclass(frozen=True)
class ModelFacts:
    """An agent's model as the plan counts it (built on the meta device)."""

    source: str  # where the config came from
    model_type: str
    architecture: str  # the model class
    shape: DecoderShape  # the text decoder
    tensors: tuple[Tensor, ...]  # every distinct parameter
    linear_params: int  # weights of Linear layers (what bf16 autocast casts)
    block_params: int  # the largest transformer block (an FSDP2 unit)
    blocks_total: int  # parameters inside all the blocks
    context: int | None = None  # max_position_embeddings
    vision: VisionShape | None = None
    head_params: int = 0  # trainable parameters of the output head (tied: the embedding): FSDP2's unsharded root gradient
    head_tied: bool = False  # the head is the input embedding

    @property
    def params(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def trainable(self) -> int:
        return sum(t.numel for t in self.tensors if t.trainable)

    @property
    def largest_trainable(self) -> int:
        return max((t.numel for t in self.tensors if t.trainable), default=0)

    @property
    def root_params(self) -> int:
        """Parameters outside the transformer blocks (embeddings, head, norms, a vision tower)."""
        return self.params - self.blocks_total


def hf_config(model: str, where: str):
    """The Hugging Face config of `model` (id, folder, or `<source>:<name>`), without any weights.

    Raises ConfigError naming `where` (the option) when it cannot be read."""
    source = split_model_name(model)
    if source is not None:
        return source[0].config(source[1]), f"{source[0].describe or 'model source'} {source[1]!r}"
    from pathlib import Path

    from transformers import AutoConfig

    from corl.plan.known_models import known_config

    known = None if Path(model).is_dir() else known_config(model)  # a local folder overrides the table
    if known is not None:
        return known[0], f"{known[1]} (corl's table of public configs; a local folder overrides it)"
    _check_reachable(model, where)
    try:
        return AutoConfig.from_pretrained(model), f"{model}/config.json"
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"{where}: cannot read the config.json of {model!r} to plan its memory ({err}); give a local folder "
            "that holds its config.json (the weights are not needed), or make the hub reachable"
        ) from None


def _check_reachable(model: str, where: str) -> None:
    """A hub id that is neither cached nor answered by the hub in one short request fails now,
    saying how to plan without it: the hub client's retries would take minutes offline."""
    from corl.models import check_model_source

    try:
        check_model_source(model, where)
    except ConfigError as err:
        raise ConfigError(
            f"{err}. The plan needs only the model's config.json: put it in a folder (the weights are not "
            f"needed) and give that folder as the model (--set {where.split(' ')[0]}=FOLDER)"
        ) from None


def as_saved(config):
    """The config as its saved config.json reads back: the attention implementation the
    family was built with (eager) is not saved, and corl loads it with the default (sdpa)."""
    return type(config).from_dict(config.to_dict())


def is_vision_config(config) -> bool:
    """As corl.models.is_vision_model: a config with a vision tower."""
    return getattr(config, "vision_config", None) is not None


def meta_model(config, lora: LoRAConfig | None = None, freeze_vision: bool = False):
    """The model built on the meta device, with corl's LoRA adapters and frozen vision tower."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    from corl.models import add_lora

    vision = is_vision_config(config)
    auto = AutoModelForImageTextToText if vision else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
        if freeze_vision and vision:
            from corl.trainer.agent import vision_parameters

            for parameter in vision_parameters(model):
                parameter.requires_grad_(False)
        if lora is not None:
            model = add_lora(model, lora)
    return model


def _text(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def decoder_shape(config, attention: str, qk_norm_width: int = 0) -> DecoderShape:
    """The text decoder's dimensions (GPT-2 names included); `qk_norm_width` as `qk_norm_width` finds it."""
    text = _text(config)
    hidden = _first(text, "hidden_size", "n_embd")
    heads = _first(text, "num_attention_heads", "n_head")
    return DecoderShape(
        layers=_first(text, "num_hidden_layers", "n_layer"),
        hidden=hidden,
        heads=heads,
        kv_heads=getattr(text, "num_key_value_heads", None) or heads,
        head_dim=getattr(text, "head_dim", None) or hidden // heads,
        intermediate=getattr(text, "intermediate_size", None) or getattr(text, "n_inner", None) or 4 * hidden,
        vocab=text.vocab_size,
        attention=attention or "sdpa",
        qk_norm_width=qk_norm_width,
    )


def qk_norm_width(model) -> int:
    """The width each query norm of the decoder normalises over (Qwen3: head_dim; OLMo-2: the whole
    projection), read from the first attention's `q_norm`; 0 for a model without one."""
    for name, module in model.named_modules():
        if name.endswith("attn.q_norm") and getattr(module, "weight", None) is not None:
            return int(module.weight.numel())
    return 0


def head_facts(model) -> tuple[int, bool]:
    """The output head's trainable parameters, and whether its weight is the input embedding's."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None:
        return 0, False
    embedding = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    tied = embedding is not None and getattr(embedding, "weight", None) is getattr(head, "weight", 0)
    return sum(p.numel() for p in head.parameters() if p.requires_grad), tied


def _first(config, *names: str) -> int:
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return int(value)
    raise ConfigError(f"the model config ({type(config).__name__}) has none of {', '.join(names)}: cannot plan its memory")


def vision_shape(config) -> VisionShape | None:
    vision = getattr(config, "vision_config", None)
    if vision is None:
        return None
    hidden = _first(vision, "hidden_size", "embed_dim")
    if getattr(vision, "embed_dim", None):  # Qwen2-VL's tower: embed_dim wide, hidden_size is the merger's output
        hidden = int(vision.embed_dim)
    intermediate = getattr(vision, "intermediate_size", None) or int(getattr(vision, "mlp_ratio", 4) * hidden)
    channels = getattr(vision, "in_channels", None) or getattr(vision, "num_channels", None) or 3
    patch = getattr(vision, "patch_size", None) or 14
    frames = getattr(vision, "temporal_patch_size", None) or 1  # Qwen2-VL patches two frames (an image twice)
    return VisionShape(
        layers=_first(vision, "num_hidden_layers", "depth"),
        hidden=hidden,
        intermediate=int(intermediate),
        patch_values=int(channels * frames * patch * patch),
    )


def model_facts(agent: AgentConfig, index: int, lora: LoRAConfig | None) -> ModelFacts:
    """Everything the plan needs of agent `index`'s model, counted on the meta device."""
    where = f"agents.{index}.model (agent {agent.name!r})"
    config, source = hf_config(agent.model, where)
    model = meta_model(config, lora, agent.freeze_vision)
    root = model.get_base_model() if hasattr(model, "get_base_model") else model
    tensors = tuple(
        Tensor(p.numel(), p.shape[0] if p.dim() else 1, p.requires_grad) for p in model.parameters()
    )  # parameters() yields a tied weight once
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    block_names = set(getattr(root, "_no_split_modules", None) or ())
    blocks = [m for m in root.modules() if type(m).__name__ in block_names]
    sizes = [sum(p.numel() for p in b.parameters()) for b in blocks]
    head, tied = head_facts(root)
    return ModelFacts(
        source=source,
        model_type=getattr(config, "model_type", "?"),
        architecture=type(root).__name__,
        shape=decoder_shape(config, getattr(root.config, "_attn_implementation", None), qk_norm_width(root)),
        tensors=tensors,
        linear_params=linear,
        block_params=max(sizes, default=0),
        blocks_total=sum(sizes),
        context=getattr(_text(config), "max_position_embeddings", None),
        vision=vision_shape(config),
        head_params=head,
        head_tied=tied,
    )
