"""GRPO math against numbers worked out by hand."""

import math

import pytest
import torch

from corl.grpo import aggregate_loss, clipped_policy_loss, group_advantages, importance_weights, kl_k3, token_logprobs


def test_group_advantages_by_hand():
    # rewards 1,0,0,1: mean 0.5; unbiased std = sqrt(4 * 0.25 / 3) = 0.57735
    # advantage = +-0.5 / (0.57735 + 1e-4) = +-0.86588
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0]]))
    assert adv.tolist()[0] == pytest.approx([0.86588, -0.86588, -0.86588, 0.86588], abs=1e-4)


def test_group_advantages_uniform_group_is_zero_and_groups_are_independent():
    # group 0: all equal -> 0; group 1: 1,0 -> mean .5, std .7071 -> +-0.7070
    adv = group_advantages(torch.tensor([[1.0, 1.0], [1.0, 0.0]]))
    assert adv[0].tolist() == [0.0, 0.0]
    assert adv[1].tolist() == pytest.approx([0.70700, -0.70700], abs=1e-4)


def test_group_advantages_without_std_scaling():
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), scale="none")
    assert adv.tolist()[0] == pytest.approx([0.75, -0.25, -0.25, -0.25])


def test_clipped_policy_loss_four_cases():
    # ratio 1.5 or 0.5 (old logprob 0), advantage +1 or -1, eps 0.2:
    #  r=1.5 A=+1: min(1.5, 1.2) = 1.2 -> loss -1.2, clipped
    #  r=1.5 A=-1: min(-1.5, -1.2) = -1.5 -> loss 1.5, not clipped
    #  r=0.5 A=+1: min(0.5, 0.8) = 0.5 -> loss -0.5, not clipped
    #  r=0.5 A=-1: min(-0.5, -0.8) = -0.8 -> loss 0.8, clipped
    lp = torch.log(torch.tensor([[1.5], [1.5], [0.5], [0.5]]))
    old = torch.zeros(4, 1)
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    loss, clipped = clipped_policy_loss(lp, old, adv, 0.2, 0.2)
    assert loss.flatten().tolist() == pytest.approx([-1.2, 1.5, -0.5, 0.8])
    assert clipped.flatten().tolist() == [True, False, False, True]


def test_clip_higher_uses_the_upper_epsilon():
    # r=1.5, A=+1, eps_high 0.28 -> clip at 1.28
    loss, _ = clipped_policy_loss(torch.log(torch.tensor([[1.5]])), torch.zeros(1, 1), torch.tensor([1.0]), 0.2, 0.28)
    assert loss.item() == pytest.approx(-1.28)


def test_on_policy_gradient_is_advantage_times_score():
    # ratio = 1 at the old policy: d loss / d lp = -A
    lp = torch.zeros(2, 1, requires_grad=True)
    loss, _ = clipped_policy_loss(lp, lp.detach(), torch.tensor([2.0, -3.0]))
    loss.sum().backward()
    assert lp.grad.flatten().tolist() == [-2.0, 3.0]


def test_kl_k3_by_hand():
    # pi = 0.5, ref = 0.25: d = log(0.25/0.5) = -0.693147; exp(d) - d - 1 = 0.5 + 0.693147 - 1 = 0.193147
    kl = kl_k3(torch.log(torch.tensor([[0.5]])), torch.log(torch.tensor([[0.25]])))
    assert kl.item() == pytest.approx(0.193147, abs=1e-6)
    assert kl_k3(torch.zeros(1, 1), torch.zeros(1, 1)).item() == 0.0


def test_loss_aggregations_by_hand():
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    # grpo (TRL loss_type "grpo"): per-sequence means 2 and 4 -> 3
    assert aggregate_loss(per_token, mask, "grpo").item() == pytest.approx(3.0)
    # dapo (TRL "dapo": every token's loss over the batch's token count): (1+2+3+4) / 4 tokens = 2.5
    assert aggregate_loss(per_token, mask, "dapo").item() == pytest.approx(2.5)
    # dr_grpo (TRL "dr_grpo"): 10 / (2 sequences * 3 max tokens) = 1.6667; with budget 5: 10 / 10 = 1
    assert aggregate_loss(per_token, mask, "dr_grpo").item() == pytest.approx(10 / 6)
    assert aggregate_loss(per_token, mask, "dr_grpo", max_tokens=5).item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="loss aggregation"):
        aggregate_loss(per_token, mask, "nope")


def test_bnpo_is_dapo_by_another_name_in_the_function_and_the_config():
    from corl.config import GRPOConfig

    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    # the same 2.5 as dapo: (1 + 2 + 3 + 4) / 4
    assert aggregate_loss(per_token, mask, "bnpo").item() == pytest.approx(2.5)
    assert GRPOConfig(loss_aggregation="bnpo").loss_aggregation == "dapo"
    assert GRPOConfig(loss_aggregation="dapo").loss_aggregation == "dapo"


def test_a_sequence_left_out_of_the_mask_by_aggregation():
    """A masked sequence (cohort.truncated_answers: drop) as TRL's mask_truncated_completions
    treats it: no tokens, but still one of the N sequences for grpo's and dr_grpo's divisor."""
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0], [5.0, 5.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])  # row 2 masked out
    # grpo: sequence means 2, 4, 0 (0 / max(0, 1)) over 3 sequences -> 2
    assert aggregate_loss(per_token, mask, "grpo").item() == pytest.approx(2.0)
    # dapo: 10 / 4 kept tokens = 2.5 (the masked row's tokens are not counted)
    assert aggregate_loss(per_token, mask, "dapo").item() == pytest.approx(2.5)
    # dr_grpo: 10 / (3 sequences * budget 4) = 0.8333
    assert aggregate_loss(per_token, mask, "dr_grpo", max_tokens=4).item() == pytest.approx(10 / 12)


def test_importance_weights_by_hand():
    # trainer vs sampler log-ratios per token: row 0 [ln 2, ln 2] (ratios 2, 2), row 1 [ln 4, ln 0.5]
    # (ratios 4, 0.5), row 2 [ln 1.5, padding]; cap 3
    log = math.log
    old = torch.tensor([[log(2.0), log(2.0)], [log(4.0), log(0.5)], [log(1.5), 7.0]])
    sampled = torch.zeros(3, 2)
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]])

    def check(mode: str, expected: list) -> None:
        torch.testing.assert_close(importance_weights(old, sampled, mask, mode, cap=3.0), torch.tensor(expected))

    # token_truncate: min(w_t, 3); padding has log-ratio 0 -> 1
    check("token_truncate", [[2.0, 2.0], [3.0, 0.5], [1.5, 1.0]])
    # token_mask: w_t where <= 3, else 0
    check("token_mask", [[2.0, 2.0], [0.0, 0.5], [1.5, 1.0]])
    # sequence_mask (TRL's / verl's): the sequence ratio W = prod_t w_t on every token where W <= 3, else 0:
    # row 0: W = 2 * 2 = 4 > 3 -> 0; row 1: W = 4 * 0.5 = 2 -> 2; row 2: W = 1.5 -> 1.5
    check("sequence_mask", [[0.0, 0.0], [2.0, 2.0], [1.5, 1.5]])
    check("off", [[1.0, 1.0]] * 3)


def test_token_logprobs_with_temperature():
    # logits [0, ln 3] at T=1: p = [1/4, 3/4]; at T=2: logits [0, ln3/2] -> p1 = sqrt3/(1+sqrt3)
    logits = torch.tensor([[[0.0, math.log(3.0)]]])
    tokens = torch.tensor([[1]])
    assert token_logprobs(logits, tokens).exp().item() == pytest.approx(0.75)
    assert token_logprobs(logits, tokens, 2.0).exp().item() == pytest.approx(math.sqrt(3) / (1 + math.sqrt(3)))
