"""Dropout in the policy: off, as TRL's `disable_dropout` does, so a sequence's old and new
log-probs are the same numbers before any update (importance ratio exactly 1)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from corl.config import validate_config
from corl.models.prepare import disable_dropout
from corl.trainer import CohortTrainer
from corl.trainer.update import frozen_logprobs, minibatch_logprobs, plan_minibatches
from tests.helpers import tiny_config


def test_the_ratio_is_exactly_one_before_any_update_with_lora_dropout(tmp_path, tiny_models, tiny_data):
    pytest.importorskip("peft")
    raw = tiny_config(
        tmp_path,
        tiny_models,
        tiny_data,
        agents=1,
        cohort={"label_source": "self"},
        compute={"lora": {"r": 4, "dropout": 0.5}},
        grpo={"num_passes": 2},
    )
    raw["data"].pop("val")
    trainer = CohortTrainer(validate_config(raw))
    agent = next(iter(trainer.agents.values()))
    assert any(isinstance(m, torch.nn.Dropout) for m in agent.model.modules())  # peft built its lora_dropout
    # peft starts lora_B at 0, so the adapters (and their dropout) add nothing until a first update;
    # give them the nonzero weights an earlier step's update would have
    torch.manual_seed(0)
    for name, parameter in agent.model.named_parameters():
        if "lora_B" in name:
            parameter.data.normal_(0.0, 0.5)
    rollout = agent.sample(trainer.train_data.problems[:2], 4, trainer.params)
    plan = plan_minibatches(agent, rollout, torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]]), None)
    temperature = trainer.params.temperature
    agent.model.train()  # as grpo_update: the old log-probs (num_passes > 1) and the loss's are both taken in train mode
    old = frozen_logprobs(agent, agent.model, rollout, plan, temperature)
    for i, rows in enumerate(plan.batches):
        new = minibatch_logprobs(agent.model, rollout, rows, temperature, plan.widths[i], plan.packed)
        ratio = torch.exp(new.detach() - old[i]) * plan.mask[rows, : plan.widths[i]]
        assert torch.equal(ratio, plan.mask[rows, : plan.widths[i]])  # 1 on every completion token, exactly


def test_a_models_own_attention_dropout_is_off_too(tiny_models):
    # a config's attention dropout is a float the attention module reads in train mode, not an nn.Dropout
    model = AutoModelForCausalLM.from_pretrained(tiny_models["llama-char"], attention_dropout=0.5, attn_implementation="eager")
    model.train()
    ids = torch.arange(3, 23).unsqueeze(0)
    torch.manual_seed(0)
    first = model(ids).logits
    assert not torch.equal(first, model(ids).logits)  # dropout on: two forwards differ
    disable_dropout(model)
    assert torch.equal(model(ids).logits, model(ids).logits)
    assert model.config.attention_dropout == 0.5  # the config (what a checkpoint saves) is left alone
