"""`CohortTrainer.step` driven by a scripted rollout engine: Algorithm 1's rewards by hand.

The engine (registered here through the same seam as `hf` and `vllm`) writes fixed
completions, chosen per agent and per prompt. Its script also depends on how many
optimizer steps the whole cohort has taken so far: a loop that let one agent update
before another sampled would hand the second agent other answers, and the rewards
below (worked out from the snapshot taken before any update) would not come out.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from corl.config import validate_config
from corl.data.rows import batch_indices
from corl.rollout import Rollout, SyncStats, completion_mask_from, register_engine
from corl.trainer import CohortTrainer
from tests.helpers import tiny_config

# SCRIPT[agent][problem] = the K answers the agent writes for that problem
SCRIPT: dict[int, dict[str, list[str]]] = {}
ENGINES: list[ScriptedEngine] = []
UPDATES = [0]  # optimizer steps taken by the whole cohort (every engine sees the same count)
METRICS: dict[str, float] = {}  # the metrics of run_one_step's step


@register_engine("scripted")
class ScriptedEngine:
    """Writes `\\boxed{answer}` completions from SCRIPT; after any update, `\\boxed{9}`.
    An answer written "5/" is cut at the token budget: `\\boxed{5}` without EOS (truncated)."""

    def __init__(self, model, tokenizer):
        self.index = len(ENGINES)  # agents build their engines in order
        self.tokenizer = tokenizer
        self.eos = tokenizer.eos_token_id
        ENGINES.append(self)

    @classmethod
    def from_config(cls, model, tokenizer, options, *, add_special_tokens=True):
        return cls(model, tokenizer)

    def generate(self, prompts, num_samples, params) -> Rollout:
        texts, cut = [], []
        for prompt in prompts:
            answers = SCRIPT[self.index][prompt.strip()] if UPDATES[0] == 0 else ["9"] * num_samples
            assert len(answers) == num_samples
            texts += [f"\\boxed{{{a.rstrip('/')}}}" for a in answers]
            cut += [a.endswith("/") for a in answers]
        tok = self.tokenizer
        tok.padding_side = "left"
        prompt_ids = tok([p for p in prompts for _ in range(num_samples)], return_tensors="pt", padding=True)
        completions = [tok(t, add_special_tokens=False)["input_ids"] + [self.eos] * (not c) for t, c in zip(texts, cut)]
        width = max(len(c) for c in completions)
        ids = torch.tensor([c + [tok.pad_token_id] * (width - len(c)) for c in completions])  # [N, C]
        mask = completion_mask_from(ids, [self.eos])
        return Rollout(
            input_ids=torch.cat([prompt_ids["input_ids"], ids], 1),
            attention_mask=torch.cat([prompt_ids["attention_mask"], mask], 1),
            completion_mask=mask,
            sampling_logprobs=None,
            texts=texts,
            prompt_length=prompt_ids["input_ids"].shape[1],
            num_samples=num_samples,
            eos_ids=(self.eos,),
        )

    def sync_weights(self, model) -> SyncStats:
        UPDATES[0] += 1
        return SyncStats()

    def sleep(self) -> None: ...

    def wake(self) -> None: ...

    def close(self) -> None: ...


def run_one_step(tmp_path: Path, tiny_models, script: dict[int, dict[str, list[str]]], k: int, label_source="peer", **cohort):
    """Rewards [N, B, K] that each agent's update was given in step 0, in the file's problem order
    (the step's metrics go to METRICS)."""
    SCRIPT.clear()
    SCRIPT.update(script)
    ENGINES.clear()
    UPDATES[0] = 0
    problems = sorted(script[0])
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"id": p, "problem": p, "answer": "0"}) + "\n" for p in problems))
    raw = tiny_config(tmp_path, tiny_models, {"train": data, "test": data}, agents=len(script))
    raw["rollout"] = {"engine": "scripted"}
    raw["cohort"].update(prompts_per_step=len(problems), samples_per_prompt=k, label_source=label_source, **cohort)
    trainer = CohortTrainer(validate_config(raw), tmp_path / "run")
    seen: dict[int, torch.Tensor] = {}
    for n, agent in trainer.agents.items():

        def spy(rollout, rewards, params, n=n, update=agent.update, **options):
            seen[n] = rewards.clone()  # [B, K] in the order the step drew its batch
            return update(rollout, rewards, params, **options)

        agent.update = spy
    METRICS.clear()
    METRICS.update(trainer.step(0))
    drawn = batch_indices(0, len(problems), len(problems), raw["cohort"]["seed"])  # file row of each batch position
    rows = [drawn.index(i) for i in range(len(problems))]
    return torch.stack([seen[n][rows] for n in range(len(script))])


def test_two_agents_teach_each_other(tmp_path, tiny_models):
    # agent 0 votes 1 on "1+1=?" and 6 on "2*3=?"; agent 1 votes 2 and 6.
    script = {
        0: {"1+1=?": ["1", "1", "2"], "2*3=?": ["5", "6", "6"]},
        1: {"1+1=?": ["2", "2", "1"], "2*3=?": ["6", "6", "6"]},
    }
    rewards = run_one_step(tmp_path, tiny_models, script, k=3)
    # agent 0 is taught by agent 1 (labels 2 and 6); agent 1 by agent 0 (labels 1 and 6)
    expected = torch.tensor(
        [
            [[0.0, 0.0, 1.0], [0.0, 1.0, 1.0]],
            [[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]],
        ]
    )
    assert torch.equal(rewards, expected)
    assert UPDATES[0] == 2  # both agents stepped (agent 1's last prompt has no signal, its first has)


def test_three_agents_on_a_ring(tmp_path, tiny_models):
    # majorities: agent 0 -> 4, agent 1 -> 7, agent 2 -> 4 (on the one problem)
    script = {
        0: {"3+4=?": ["4", "4", "7", "1"]},
        1: {"3+4=?": ["7", "7", "7", "4"]},
        2: {"3+4=?": ["4", "1", "4", "7"]},
    }
    rewards = run_one_step(tmp_path, tiny_models, script, k=4)
    # agent 0 is taught by agent 2 (label 4), agent 1 by agent 0 (4), agent 2 by agent 1 (7)
    expected = torch.tensor(
        [
            [[1.0, 1.0, 0.0, 0.0]],
            [[0.0, 0.0, 0.0, 1.0]],
            [[0.0, 0.0, 0.0, 1.0]],
        ]
    )
    assert torch.equal(rewards, expected)


def test_self_labels_through_the_same_loop(tmp_path, tiny_models):
    script = {0: {"1+1=?": ["2", "2", "3"], "2*3=?": ["6", "5", "5"]}, 1: {"1+1=?": ["2"] * 3, "2*3=?": ["6"] * 3}}
    rewards = run_one_step(tmp_path, tiny_models, script, k=3, label_source="self")
    # TTRL: each agent's own majority (2 and 5 for agent 0; 2 and 6 for agent 1)
    assert torch.equal(rewards[0], torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]))
    assert torch.equal(rewards[1], torch.ones(2, 3))
    assert UPDATES[0] == 1  # agent 1's rewards are all 1: no signal, no optimizer step


def test_a_truncated_completion_neither_earns_nor_enters_the_loss(tmp_path, tiny_models):
    # agent 1's majority on "1+1=?" is 2: agent 0's label. Agent 0's third completion writes \boxed{2}
    # but is cut at the budget: under drop (the default) it has no answer (reward 0, as "1" earns) and is
    # left out of the loss (masked_sequences); under keep its \boxed{2} counts (reward 1) and it trains.
    script = {0: {"1+1=?": ["1", "2", "2/"]}, 1: {"1+1=?": ["2", "2", "1"]}}
    rewards = run_one_step(tmp_path, tiny_models, script, k=3)
    assert rewards[0].tolist() == [[0.0, 1.0, 0.0]]
    assert METRICS["agent0/masked_sequences"] == 1.0 and METRICS["agent1/masked_sequences"] == 0.0
    (tmp_path / "keep").mkdir()
    rewards = run_one_step(tmp_path / "keep", tiny_models, script, k=3, truncated_answers="keep")
    assert rewards[0].tolist() == [[0.0, 1.0, 1.0]]
    assert METRICS["agent0/masked_sequences"] == 0.0
