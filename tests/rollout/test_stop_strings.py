"""Stop strings (SamplingParams.stop): a completion ends at the token that completes the first stop
string, which is kept in the mask (it was sampled), and its text is what comes before the string.
By hand on a per-character tokenizer and a BPE one, then through the HF engine."""

from __future__ import annotations

import torch

from corl.rollout import HFGenerateEngine, SamplingParams
from corl.rollout.base import finish_completions
from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer


def _ids(tok, texts: list[str], width: int) -> torch.Tensor:
    rows = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    return torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])


def test_a_completion_ends_at_the_token_that_completes_the_stop_string():
    tok = char_tokenizer()
    eos = tok.eos_token_id
    ids = _ids(tok, ["12\nq: 3+4", "7", "5+5=10+12"], 9)  # [3, 9]
    ids[1, 1] = eos  # "7" then EOS: ends at EOS, no stop
    completion, mask, texts, stopped = finish_completions(ids, [eos], tok, stop=("\n",))
    # row 0: "1", "2", "\n" are kept (3 tokens), the rest is padding; its text drops the stop
    assert mask[0].tolist() == [1, 1, 1, 0, 0, 0, 0, 0, 0] and texts[0] == "12"
    assert (completion[0, 3:] == tok.pad_token_id).all() and completion[0, :3].tolist() == ids[0, :3].tolist()
    assert mask[1].tolist()[:2] == [1, 1] and texts[1] == "7"  # EOS first
    assert mask[2].sum() == 9 and texts[2] == "5+5=10+12"  # no stop, no EOS: cut by the budget
    assert stopped.tolist() == [True, False, False]


def test_the_earliest_of_several_stop_strings_wins_and_none_leaves_the_rollout_as_it_was():
    tok = char_tokenizer()
    ids = _ids(tok, ["8. q: 9"], 7)
    _, mask, texts, stopped = finish_completions(ids, [tok.eos_token_id], tok, stop=("q:", "."))
    assert texts == ["8"] and mask[0].tolist() == [1, 1, 0, 0, 0, 0, 0] and stopped.tolist() == [True]
    _, plain, texts, stopped = finish_completions(ids, [tok.eos_token_id], tok)
    assert stopped is None and texts == ["8. q: 9"] and plain[0].sum() == 7


def test_a_token_that_holds_the_stop_string_and_more_is_kept_whole():
    corpus = ["Q: 1+2\nA: 3\n\nQ: 4+4\nA: 8\n\n"] * 50
    tok = bpe_tokenizer(corpus, vocab_size=120)
    text = " 3\n\nQ: 4+4"
    ids = _ids(tok, [text], len(tok(text, add_special_tokens=False)["input_ids"]))
    _, mask, texts, stopped = finish_completions(ids, [tok.eos_token_id], tok, stop=("\n",))
    kept = tok.decode(ids[0, : int(mask[0].sum())].tolist())
    assert texts == [" 3"] and stopped.tolist() == [True]
    assert "\n" in kept and "\n" not in tok.decode(ids[0, : int(mask[0].sum()) - 1].tolist())  # the fewest tokens


def test_the_hf_engine_ends_samples_at_stop_strings(tiny_models):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = tiny_models["llama-char"]
    model, tok = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    engine = HFGenerateEngine(model, tok)
    prompts = ["3+4=?\n", "9-2=?\n"]
    free = engine.generate(prompts, 2, SamplingParams(temperature=0.0, max_new_tokens=12))
    stop = "{"  # the fixture models answer \boxed{d}: every completion holds it
    assert all(stop in t for t in free.texts)
    cut = engine.generate(prompts, 2, SamplingParams(temperature=0.0, max_new_tokens=12, stop=(stop,)))
    assert cut.texts == [t[: t.index(stop)] for t in free.texts]
    assert cut.stopped.all() and not cut.truncated.any()
    lengths = cut.completion_mask.sum(1)
    assert (lengths < free.completion_mask.sum(1)).all()
    assert (cut.sampling_logprobs[cut.completion_mask == 0] == 0).all()
    for i, n in enumerate(lengths.tolist()):  # the kept tokens are the free run's own, up to the stop
        assert torch.equal(cut.completion_ids[i, :n], free.completion_ids[i, :n])
