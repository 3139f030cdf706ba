"""Tiny tokenizers, random HF models per architecture, the family registry and cached pretraining."""

from __future__ import annotations

import dataclasses
import json
from itertools import islice

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from corl.studies.tiny import pretrain as pretrain_module
from corl.studies.tiny.families import ARCHS, FAMILIES, FamilySpec, build_random_model, get_family, sibling
from corl.studies.tiny.pretrain import SPEC_FILE, build_tokenizer, ensure_pretrained
from corl.studies.tiny.task import TYPES, make_split, prompt_text
from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer

SMALL = dict(hidden=32, layers=2, heads=2, ffn=64)  # fast stand-in for the default size


@pytest.fixture(scope="module")
def rows():
    return make_split("validation", 100, seed=0)


@pytest.fixture(scope="module")
def tokenizers(rows):
    corpus = [prompt_text(r["problem"]) + r["solution"] for r in make_split("train", 1000)]
    return {"char": char_tokenizer(), "bpe": bpe_tokenizer(corpus, vocab_size=320)}


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_tokenizer_round_trip(kind, tokenizers, rows, tmp_path, offline):
    tok = tokenizers[kind]
    assert (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    texts = [prompt_text(r["problem"]) + r["solution"] for r in rows]
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.unk_token_id not in ids
        assert tok.decode(ids) == text
        # special tokens vanish without leaving spaces between characters
        assert tok.decode(ids + [tok.eos_token_id, tok.pad_token_id], skip_special_tokens=True) == text
    completion = tok.encode(rows[0]["solution"], add_special_tokens=False)
    assert tok.decode(completion, skip_special_tokens=True).endswith("\\boxed{" + rows[0]["answer"] + "}")
    assert tok.encode("1+2=?\n") == tok.encode("1+2=?\n", add_special_tokens=False)  # no bos/eos added

    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert [loaded.encode(t) for t in texts] == [tok.encode(t) for t in texts]
    assert (loaded.pad_token, loaded.eos_token) == ("<pad>", "<eos>")
    loaded.padding_side = "left"
    batch = loaded(["1+2=?\n", "12*3+4=?\n"], padding=True)
    assert batch["input_ids"][0][0] == loaded.pad_token_id and batch["attention_mask"][0][0] == 0


def test_char_tokenizer_maps_foreign_characters_to_unk():
    tok = char_tokenizer()
    assert tok.encode("1+Z", add_special_tokens=False)[-1] == tok.unk_token_id
    assert len(char_tokenizer("ab")) == 5


# qwen2 model directories always load their tokenizer as Qwen2Tokenizer, so qwen2 pairs with bpe only.
PAIRINGS = [(a, k) for a in ARCHS for k in ("char", "bpe") if not (a == "qwen2" and k == "char")]


@pytest.mark.parametrize(("arch", "kind"), PAIRINGS)
def test_random_model_save_load_generate(arch, kind, tokenizers, rows, tmp_path, offline):
    tok = tokenizers[kind]
    model = build_random_model(arch, tok, seed=3, **SMALL)
    assert model.config.vocab_size == len(tok)
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert model.generation_config.pad_token_id == tok.pad_token_id
    again = build_random_model(arch, tok, seed=3, **SMALL)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))

    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager")
    ltok = AutoTokenizer.from_pretrained(tmp_path)
    texts = [prompt_text(r["problem"]) + r["solution"] for r in rows]
    assert [ltok.encode(t) for t in texts] == [tok.encode(t) for t in texts]  # whatever class AutoTokenizer picks
    assert type(loaded).__name__ == type(model).__name__
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name
    assert loaded.generation_config.eos_token_id == tok.eos_token_id

    ltok.padding_side = "left"
    enc = ltok(["1+2=?\n", "12*3+4=?\n"], return_tensors="pt", padding=True)
    out = loaded.generate(**enc, do_sample=True, max_new_tokens=5)
    assert out.shape[0] == 2 and out.shape[1] <= enc["input_ids"].shape[1] + 5


def test_qwen2_needs_bpe():
    with pytest.raises(ValueError, match="Qwen2Tokenizer"):
        dataclasses.replace(FAMILIES["qwen2-bpe"], tokenizer="char")


def test_unknown_arch_explains():
    with pytest.raises(ValueError, match="unknown architecture"):
        build_random_model("mamba", char_tokenizer())


def test_registry_covers_the_diversity_channels():
    assert len(FAMILIES) >= 3
    specs = list(FAMILIES.values())
    assert len({s.arch for s in specs}) == len(specs) and {s.arch for s in specs} <= set(ARCHS)  # a family per architecture
    assert {s.tokenizer for s in specs} == {"char", "bpe"}
    assert len({json.dumps(s.mixture, sort_keys=True) for s in specs}) == len(specs)
    for s in specs:
        assert set(s.mixture) <= set(TYPES) and s.steps > 0
    assert len({s.fingerprint() for s in specs}) == len(specs)


def test_seed_siblings():
    base = FAMILIES["llama-char"]
    sib = get_family("llama-char-seed7")
    assert sib == sibling("llama-char", 7)
    assert sib.name == "llama-char-seed7" and sib.seed == 7
    assert dataclasses.replace(sib, name=base.name, seed=base.seed) == base
    assert sib.fingerprint() != base.fingerprint()
    bpe = FAMILIES["qwen2-bpe"]
    assert build_tokenizer(sibling(bpe, 5)).get_vocab() == build_tokenizer(bpe).get_vocab()  # same tokenizer
    with pytest.raises(KeyError, match="unknown tiny family"):
        get_family("bert-char")


@pytest.mark.parametrize("name", list(FAMILIES))
def test_family_save_load_offline(name, tmp_path, offline):
    spec = dataclasses.replace(FAMILIES[name], **SMALL)
    tok = build_tokenizer(spec)
    assert build_tokenizer(spec).get_vocab() == tok.get_vocab()  # BPE training is deterministic
    model = build_random_model(spec.arch, tok, seed=spec.seed, **SMALL)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    ltok = AutoTokenizer.from_pretrained(tmp_path)
    text = prompt_text("3x+5=20, x=?") + "3x=20-5=15. x=15/3=5. \\boxed{5}"
    assert ltok.encode(text) == tok.encode(text)
    assert ltok.decode(ltok.encode(text)) == text
    assert (ltok.pad_token_id, ltok.eos_token_id) == (tok.pad_token_id, tok.eos_token_id)
    assert loaded.config.model_type == spec.arch


def _entries(cache_dir) -> list[str]:
    return sorted(p.name for p in cache_dir.iterdir() if not p.name.endswith(".lock"))


def _tiny_spec(**kw) -> FamilySpec:
    base = dict(name="test-tiny", arch="llama", tokenizer="char", mixture={"arith": 1.0}, steps=30,
                batch_size=8, lr=1e-2, warmup_steps=5, **SMALL)  # fmt: skip
    return FamilySpec(**{**base, **kw})


def test_pretrain_then_cache_hit(tmp_path, offline, monkeypatch):
    spec = _tiny_spec()
    stale = tmp_path / f".{pretrain_module.cache_path(spec, tmp_path).name}.tmp-killed"
    stale.mkdir()  # as left by a build that was killed
    path = ensure_pretrained(spec, cache_dir=tmp_path, progress=False)
    assert path.parent == tmp_path and path.name.startswith("test-tiny-")
    assert _entries(tmp_path) == [path.name]  # no temporary left behind, stale one removed
    stats = json.loads((path / "pretrain_stats.json").read_text())
    assert stats["steps"] == 30
    assert stats["loss_last"] < 0.7 * stats["loss_first"]
    record = json.loads((path / SPEC_FILE).read_text())
    assert record["fingerprint"] == spec.fingerprint()
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    assert model.config.model_type == "llama" and len(tok) == model.config.vocab_size

    def no_training(*args, **kwargs):
        raise AssertionError("cache hit must not retrain")

    monkeypatch.setattr(pretrain_module, "pretrain", no_training)
    assert ensure_pretrained(spec, cache_dir=tmp_path, progress=False) == path


def test_interrupted_build_leaves_no_cache_entry(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pretrain_module, "pretrain", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ensure_pretrained(_tiny_spec(), cache_dir=tmp_path, progress=False)
    assert _entries(tmp_path) == []


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CORL_CACHE", str(tmp_path))
    spec = _tiny_spec()
    assert pretrain_module.cache_path(spec).parent == tmp_path / "tiny"


def test_build_refuses_a_tokenizer_that_reloads_differently(tokenizers, tmp_path):
    tokenizers["char"].save_pretrained(tmp_path)
    with pytest.raises(RuntimeError, match="tokenizes .* differently"):
        pretrain_module._check_reloaded_tokenizer(tmp_path, tokenizers["bpe"], FAMILIES["llama-char"])
    pretrain_module._check_reloaded_tokenizer(tmp_path, tokenizers["char"], FAMILIES["llama-char"])  # same: fine


def test_slips_are_validated_and_named_in_the_fingerprint():
    with pytest.raises(ValueError, match="slips"):
        _tiny_spec(slips={"calculus": 0.5})
    with pytest.raises(ValueError, match="slips"):
        _tiny_spec(slips={"arith": 1.5})
    assert _tiny_spec(slips={"arith": 0.5}).fingerprint() != _tiny_spec().fingerprint()


@pytest.mark.parametrize(("share", "low", "high"), [(0.0, 0, 0), (1.0, 1, 1), (0.5, 0.35, 0.65)])
def test_pretraining_batches_hold_the_slipping_teachers_share(share, low, high):
    spec = _tiny_spec(mixture={"mod": 1.0, "linear": 1.0}, slips={"mod": share}, batch_size=50)
    tok = char_tokenizer()
    slips = {"mod": [], "linear": []}
    for batch in islice(pretrain_module.training_batches(spec, tok), 4):
        for ids, labels in zip(batch["input_ids"], batch["labels"]):
            prompt = tok.decode(ids[labels == -100], skip_special_tokens=True)
            completion = tok.decode(labels[labels != -100], skip_special_tokens=True)
            kind = "mod" if "%" in prompt else "linear"
            # a slipped solution has one step less than the true one: mod 2 -> 1, linear 2 -> 1
            slips[kind].append(completion.count(". ") == 1)
    assert low <= sum(slips["mod"]) / len(slips["mod"]) <= high
    assert not any(slips["linear"])  # a type without a slip share is always taught in full


@pytest.mark.parametrize("arch", ARCHS)
def test_pretraining_passes_sum_to_the_whole_batchs_gradient(arch):
    spec = _tiny_spec(arch=arch, tokenizer="bpe" if arch == "qwen2" else "char", batch_size=24,
                      mixture={t: 1.0 for t in TYPES})  # fmt: skip
    tok = build_tokenizer(spec)
    batch = next(pretrain_module.training_batches(spec, tok))
    passes = pretrain_module.length_passes(batch, rows=5)
    assert [len(p["input_ids"]) for p in passes] == [5, 5, 5, 5, 4]
    # every row once, and trimming dropped padding only: the same completion tokens in all
    assert sum(int(p["attention_mask"].sum()) for p in passes) == int(batch["attention_mask"].sum())
    assert sum(int((p["labels"] != -100).sum()) for p in passes) == int((batch["labels"] != -100).sum())
    assert sum(p["input_ids"].numel() for p in passes) < 0.9 * batch["input_ids"].numel()  # mixed lengths: padding saved

    def gradients(fn):
        model = build_random_model(arch, tok, seed=3, **SMALL)
        model.train()
        loss = fn(model)
        return float(loss.detach()), [p.grad.clone() for p in model.parameters()]

    def one_pass(model):
        loss = model(**batch).loss
        loss.backward()
        return loss

    whole_loss, whole = gradients(one_pass)
    parts_loss, parts = gradients(lambda model: pretrain_module.accumulate_gradients(model, batch, rows=5))
    assert parts_loss == pytest.approx(whole_loss, rel=1e-5)
    for a, b in zip(whole, parts):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
