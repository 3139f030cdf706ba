"""The shapes of the models corl's own configs name, so that `corl plan` works offline.

Each entry is the part of the model's public config.json (huggingface.co/<id>/blob/main/config.json)
that the plan reads: hidden size, layers, heads, KV heads, head width, MLP width, vocabulary,
tied embeddings, context (and, for the vision-language models, their vision tower). A local
folder with a config.json, or a config in the Hugging Face cache, still takes precedence
(`corl.plan.models.hf_config`): this table is read only when neither is at hand.
"""

from __future__ import annotations

import copy

_QWEN25_3B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": True,
}
_QWEN25_15B = {  # Qwen2.5-1.5B and its Math and Coder variants share the shape
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": True,
}
_QWEN25_MATH_15B = {**_QWEN25_15B, "max_position_embeddings": 4096, "rope_theta": 10000.0}
_LLAMA32_3B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_hidden_layers": 28,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": True,
}
_LLAMA32_1B = {
    **_LLAMA32_3B,
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "head_dim": 64,
}
_QWEN3_17B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "rope_theta": 1000000,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": True,
}
_QWEN25_VL_3B = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "image_token_id": 151655,
    "video_token_id": 151656,
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
    "tie_word_embeddings": True,
    "text_config": {
        "model_type": "qwen2_5_vl_text",
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_hidden_layers": 36,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "max_position_embeddings": 128000,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": True,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    },
    "vision_config": {
        "depth": 32,
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "in_chans": 3,
        "out_hidden_size": 2048,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
        "fullatt_block_indexes": [7, 15, 23, 31],
        "hidden_act": "silu",
    },
}
_GEMMA3_4B = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "boi_token_index": 255999,
    "eoi_token_index": 256000,
    "image_token_index": 262144,
    "mm_tokens_per_image": 256,
    "text_config": {
        "model_type": "gemma3_text",
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "num_hidden_layers": 34,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "query_pre_attn_scalar": 256,
        "vocab_size": 262208,
        "sliding_window": 1024,
        "max_position_embeddings": 131072,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "tie_word_embeddings": True,
    },
    "vision_config": {
        "model_type": "siglip_vision_model",
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "image_size": 896,
        "patch_size": 14,
        "vision_use_head": False,
    },
}
_GEMMA3_1B = {
    "architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text",
    "hidden_size": 1152,
    "intermediate_size": 6912,
    "num_hidden_layers": 26,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "query_pre_attn_scalar": 256,
    "vocab_size": 262144,
    "sliding_window": 512,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": True,
}

# hub id -> config.json fields; an instruction-tuned variant has its base model's shape
KNOWN_CONFIGS: dict[str, dict] = {
    "Qwen/Qwen2.5-3B": _QWEN25_3B,
    "Qwen/Qwen2.5-3B-Instruct": _QWEN25_3B,
    "Qwen/Qwen2.5-1.5B": _QWEN25_15B,
    "Qwen/Qwen2.5-1.5B-Instruct": _QWEN25_15B,
    "Qwen/Qwen2.5-Coder-1.5B": _QWEN25_15B,
    "Qwen/Qwen2.5-Coder-1.5B-Instruct": _QWEN25_15B,
    "Qwen/Qwen2.5-Math-1.5B": _QWEN25_MATH_15B,
    "Qwen/Qwen2.5-Math-1.5B-Instruct": _QWEN25_MATH_15B,
    "Qwen/Qwen3-1.7B": _QWEN3_17B,
    "Qwen/Qwen3-1.7B-Base": _QWEN3_17B,
    "Qwen/Qwen2.5-VL-3B-Instruct": _QWEN25_VL_3B,
    "meta-llama/Llama-3.2-3B": _LLAMA32_3B,
    "meta-llama/Llama-3.2-3B-Instruct": _LLAMA32_3B,
    "meta-llama/Llama-3.2-1B": _LLAMA32_1B,
    "meta-llama/Llama-3.2-1B-Instruct": _LLAMA32_1B,
    "google/gemma-3-4b-it": _GEMMA3_4B,
    "google/gemma-3-4b-pt": _GEMMA3_4B,
    "google/gemma-3-1b-it": _GEMMA3_1B,
    "google/gemma-3-1b-pt": _GEMMA3_1B,
}
_BY_LOWER = {name.lower(): name for name in KNOWN_CONFIGS}


def known_config(model: str):
    """The transformers config of a model in the table (hub ids match case-insensitively), or None."""
    name = _BY_LOWER.get(model.strip().lower())
    if name is None:
        return None
    from transformers import AutoConfig

    fields = copy.deepcopy(KNOWN_CONFIGS[name])
    return AutoConfig.for_model(fields.pop("model_type"), **fields), name
