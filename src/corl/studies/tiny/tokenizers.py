"""Tokenizers for the tiny cohort: a per-character tokenizer and a small byte-level BPE (Qwen2-style split).

Both are ordinary `PreTrainedTokenizerFast` objects (saved as `TokenizersBackend` by
transformers 5), so `save_pretrained` / `AutoTokenizer.from_pretrained` work offline and
the rest of corl treats them like any hub tokenizer. They share three special tokens:
`<pad>` (id 0), `<eos>` (id 1, also the model's bos id) and `<unk>` (id 2). Neither adds
special tokens on `encode`: training code appends EOS to target sequences itself.

`decode(encode(s)) == s` holds exactly for task text, newlines and spaces included, so
an answer extractor finds `\\boxed{...}` in decoded completions verbatim.
"""

from __future__ import annotations

import string
from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, EOS, UNK)  # ids 0, 1, 2 in both tokenizer kinds

# Every character the tiny task writes, plus headroom for variations of it.
DEFAULT_ALPHABET = string.digits + string.ascii_lowercase + "+-*/%=?.,:;()[]{}<>\\ \n"

MODEL_MAX_LENGTH = 256


def _wrap(tok: Tokenizer, padding_side: str) -> PreTrainedTokenizerFast:
    """Wrap a raw `tokenizers.Tokenizer` with corl's special tokens and decoding settings."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        padding_side=padding_side,
        model_max_length=MODEL_MAX_LENGTH,
        clean_up_tokenization_spaces=False,  # would rewrite " ." etc. in decoded text
    )


def char_tokenizer(alphabet: str = DEFAULT_ALPHABET, padding_side: str = "right") -> PreTrainedTokenizerFast:
    """One token per character of `alphabet`; other characters map to `<unk>`."""
    chars = list(dict.fromkeys(alphabet))  # dedupe, keep order
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # [\s\S] also matches newline; "isolated" keeps every character as its own piece.
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()  # join pieces with no separator
    return _wrap(tok, padding_side)


# The pre-tokenizer regex of Qwen2's byte-level BPE (digits split one by one). transformers
# rebuilds any tokenizer saved next to a qwen2 model as `Qwen2Tokenizer`, which imposes this
# pre-tokenization on the saved vocab and merges; training the BPE with the same one makes
# the tokenizer identical whichever class `AutoTokenizer` picks when loading it.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def bpe_tokenizer(
    corpus: Iterable[str], vocab_size: int = 384, padding_side: str = "right", min_frequency: int = 2
) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on `corpus`, pre-tokenized like Qwen2 (merges never span digits).

    Deterministic for a given corpus order. `vocab_size` counts the 256 byte symbols and
    the 3 special tokens, so 384 leaves ~125 merges.
    """
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return _wrap(tok, padding_side)
