"""The tiny cohort's families: randomly initialised HF models and the registry of diversity channels.

A *family* fixes everything that makes one tiny model differ from another (paper: peers
from different model families disagree in useful ways): architecture, tokenizer kind,
size, pretraining mixture over problem types, seed and pretraining budget. `FAMILIES`
declares the embedded default's cohort in one place; `sibling` derives a seed-only
variant of a family for "same family" comparisons.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

import torch
from transformers import (
    AutoModelForCausalLM,
    GemmaConfig,
    GenerationConfig,
    GPT2Config,
    LlamaConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2Config,
)

from corl.studies.tiny.task import TYPES

ARCHS = ("llama", "qwen2", "gpt2", "gemma")
MAX_POSITIONS = 256
MAX_NEW_TOKENS = 64  # default for generate(); tiny-task solutions are < 50 tokens


def _config(arch: str, vocab_size: int, ids: dict, hidden: int, layers: int, heads: int, ffn: int):
    """An ordinary HF config of `arch` with dropout off and the tokenizer's special ids."""
    if arch == "llama":
        return LlamaConfig(
            vocab_size=vocab_size, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=MAX_POSITIONS,
            attention_dropout=0.0, tie_word_embeddings=True, **ids,
        )  # fmt: skip
    if arch == "qwen2":
        return Qwen2Config(
            vocab_size=vocab_size, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=min(2, heads), max_position_embeddings=MAX_POSITIONS,
            attention_dropout=0.0, tie_word_embeddings=True, **ids,
        )  # fmt: skip
    if arch == "gpt2":
        return GPT2Config(
            vocab_size=vocab_size, n_embd=hidden, n_layer=layers, n_head=heads, n_inner=ffn,
            n_positions=MAX_POSITIONS, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            tie_word_embeddings=True, **ids,
        )  # fmt: skip
    if arch == "gemma":
        return GemmaConfig(
            vocab_size=vocab_size, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=heads, head_dim=hidden // heads,
            max_position_embeddings=MAX_POSITIONS, attention_dropout=0.0, tie_word_embeddings=True, **ids,
        )  # fmt: skip
    raise ValueError(f"unknown architecture {arch!r}; choose one of {', '.join(ARCHS)}")


def build_random_model(
    arch: str,
    tokenizer: PreTrainedTokenizerBase,
    hidden: int = 128,
    layers: int = 4,
    heads: int = 4,
    ffn: int = 512,
    seed: int = 0,
) -> PreTrainedModel:
    """A freshly initialised causal LM of `arch` (one of `ARCHS`) sized for `tokenizer`.

    Initialisation is deterministic in `seed` and leaves the global torch RNG untouched.
    Eager attention: faster than sdpa at this size on CPU (docs/CPU-NOTES.md).
    """
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    if eos is None or pad is None:
        raise ValueError("tokenizer needs eos_token and pad_token set (use corl.studies.tiny.tokenizers)")
    ids = dict(bos_token_id=eos, eos_token_id=eos, pad_token_id=pad)
    config = _config(arch, len(tokenizer), ids, hidden, layers, heads, ffn)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.loss_type = "ForCausalLM"  # GPT2LMHeadModel's class name doesn't map to a loss; silences a warning
    model.generation_config = GenerationConfig(
        bos_token_id=eos, eos_token_id=eos, pad_token_id=pad, max_new_tokens=MAX_NEW_TOKENS
    )
    return model


# --- the registry -----------------------------------------------------------------------

TOKENIZER_KINDS = ("char", "bpe")


@dataclass(frozen=True)
class FamilySpec:
    """Everything that defines one tiny model family; its hash names the pretraining cache."""

    name: str
    arch: str  # one of ARCHS
    tokenizer: str  # "char" | "bpe" (qwen2 needs "bpe": its model dirs load Qwen2Tokenizer)
    mixture: dict[str, float]  # pretraining weights over corl.studies.tiny.task.TYPES
    steps: int  # optimizer steps of pretraining (a count, not a clock: reproducible)
    seed: int = 0  # initialisation and data order
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    ffn: int = 512
    batch_size: int = 64
    lr: float = 3e-3
    warmup_steps: int = 20
    difficulty: int = 1  # corl.studies.tiny.task difficulty of the pretraining data
    bpe_vocab_size: int = 384  # only for tokenizer == "bpe"
    # Per type, the share of pretraining rows taught by the teacher that stops one step short
    # (corl.studies.tiny.task.slipped): the family learns the whole procedure but prefers ending early.
    slips: dict[str, float] = field(default_factory=dict)
    notes: str = field(default="", compare=False)

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise ValueError(f"family {self.name!r}: arch {self.arch!r} is not one of {', '.join(ARCHS)}")
        if self.tokenizer not in TOKENIZER_KINDS:
            raise ValueError(f"family {self.name!r}: tokenizer {self.tokenizer!r} is not one of {TOKENIZER_KINDS}")
        if self.arch == "qwen2" and self.tokenizer != "bpe":
            raise ValueError(
                f"family {self.name!r}: a qwen2 model directory always loads its tokenizer as Qwen2Tokenizer "
                "(byte-level BPE), which would re-split a char tokenizer's text; use tokenizer='bpe' with qwen2"
            )
        unknown = set(self.mixture) - set(TYPES)
        if unknown or not any(w > 0 for w in self.mixture.values()):
            raise ValueError(f"family {self.name!r}: mixture {self.mixture} needs positive weights over {', '.join(TYPES)}")
        bad = {t: v for t, v in self.slips.items() if t not in TYPES or not 0.0 <= v <= 1.0}
        if bad:
            raise ValueError(f"family {self.name!r}: slips {bad} must map types of {', '.join(TYPES)} to shares in [0, 1]")

    def fingerprint(self) -> str:
        """Short hash of every field that changes the pretrained weights (name and notes excluded)."""
        fields = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("name", "notes")}
        blob = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


_SEED_SUFFIX = "-seed"

# Each family is strong on its own two problem types and weak on the other two, so that a
# pair's strengths complement each other (Theorem 1's regime: per-type p_A + p_B > 1). A
# family is weak on a type in one of two ways, as real models are: it saw little of it
# (arithmetic chains for the Qwen2 family, a fifth of its rows) or it was taught it mostly by
# a teacher with a systematic slip (`slips`: the teacher stops one step short, so the
# family knows the whole procedure but its majority answer is the slip's). The second is
# what self-reward cannot fix and a peer can: the paper's mechanism. Mixtures, slip shares
# and step counts were chosen on the validation split: the bases' sampled accuracy per type
# and short GT-Reward probes (README, "The embedded default, measured"). Narrow models (hidden 64) with wide batches learn these
# tasks several times faster per CPU second than hidden 128 at batch 64. The ring's third
# family slips on the two types its ring teacher (qwen2-bpe) is strong on and none other
# slips on: arithmetic chains and remainders. Only families with rotary positions on whole
# heads learned chains well enough for a slip on them to be unlearned in 40 RL steps (a
# GPT-2 family did not, at any share), hence Gemma.
_SMALL = dict(hidden=64, ffn=256, batch_size=128)
# In ring order: `corl quickstart --agents N` takes the first N (agent n learns from agent n-1).
FAMILIES: dict[str, FamilySpec] = {
    spec.name: spec
    for spec in (
        FamilySpec(
            name="llama-char",
            arch="llama",
            tokenizer="char",
            mixture={"arith": 0.55, "linear": 0.15, "mod": 0.15, "digitsum": 0.15},
            # 65%, not 60%: at 60% the slip leaked on some seeds (its linear equations right
            # greedily on up to 58% of validation), leaving GT-Reward no headroom; at 65% it held
            # on every validation seed probed while 20-25% of samples stayed right (docs/studies.md)
            slips={"linear": 0.65},
            steps=600,
            seed=0,
            notes="Llama-style, per-character tokenizer; strong on arithmetic chains and digit sums, "
            "taught linear equations mostly by the slipping teacher (it boxes a*x, not x).",
            **_SMALL,
        ),
        FamilySpec(
            name="qwen2-bpe",
            arch="qwen2",
            tokenizer="bpe",
            mixture={"arith": 0.18, "linear": 0.25, "mod": 0.45, "digitsum": 0.12},
            slips={"digitsum": 0.6},
            # 900, not 750: with more steps it knows the digit sums' right branch well enough for
            # GT-Reward to learn them in 40 RL steps on every validation seed probed (docs/studies.md)
            steps=900,
            seed=1,
            notes="Qwen2-style (2 KV heads), byte-level BPE; strong on remainders and linear equations, "
            "taught digit sums mostly by the slipping teacher (it drops the last digit).",
            **_SMALL,
        ),
        FamilySpec(
            name="gemma-bpe",
            arch="gemma",
            tokenizer="bpe",
            mixture={"arith": 0.3, "linear": 0.25, "mod": 0.3, "digitsum": 0.15},
            slips={"arith": 0.6, "mod": 0.55},
            steps=750,
            seed=2,
            notes="Gemma-style (GeGLU, embeddings scaled by sqrt(hidden), RMSNorm on 1 + w), byte-level BPE; "
            "strong on linear equations, taught arithmetic chains and remainders mostly by the slipping teacher "
            "(it boxes the value before the last step), and few digit sums. In the three-agent ring "
            "llama-char <- gemma-bpe <- qwen2-bpe <- llama-char it teaches llama-char the equations its slipping "
            "teacher left it and learns chains and remainders from qwen2-bpe, strong on both.",
            **_SMALL,
        ),
    )
}


def sibling(base: str | FamilySpec, seed: int) -> FamilySpec:
    """A seed-only variant of a family (same everything else), named `<base>-seed<seed>`."""
    spec = FAMILIES[base] if isinstance(base, str) else base
    return dataclasses.replace(spec, name=f"{spec.name}{_SEED_SUFFIX}{seed}", seed=seed)


def get_family(name: str) -> FamilySpec:
    """The spec registered as `name`, or the sibling it names (e.g. "llama-char-seed7")."""
    if name in FAMILIES:
        return FAMILIES[name]
    base, sep, seed = name.rpartition(_SEED_SUFFIX)
    if sep and base in FAMILIES and seed.isdigit():
        return sibling(base, int(seed))
    raise KeyError(
        f"unknown tiny family {name!r}; choose one of {', '.join(FAMILIES)} "
        f"or a seed sibling such as '{next(iter(FAMILIES))}{_SEED_SUFFIX}1'"
    )
