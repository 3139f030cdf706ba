"""RENT and Intuitor rewards and the EMA teacher update, on numbers worked out by hand."""

import math

import pytest
import torch

from corl.rewards import entropy_rewards, masked_mean, self_certainty_rewards, token_entropy, token_self_certainty
from corl.trainer.agent import ema_update


def test_entropy_by_hand():
    # uniform over 4: H = ln 4 = 1.386294; one-hot-ish (logits 0 vs -inf): H = 0
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [0.0, -1e9, -1e9, -1e9]]])
    assert token_entropy(logits)[0].tolist() == pytest.approx([math.log(4), 0.0], abs=1e-6)
    # p = (1/2, 1/2, 0, 0) via logits (0, 0, -inf, -inf): H = ln 2
    assert token_entropy(torch.tensor([[[0.0, 0.0, -1e9, -1e9]]])).item() == pytest.approx(math.log(2), abs=1e-6)


def test_self_certainty_by_hand():
    # uniform p: KL(U || U) = 0
    assert token_self_certainty(torch.zeros(1, 1, 4)).item() == pytest.approx(0.0, abs=1e-6)
    # p = (1/2, 1/6, 1/6, 1/6): KL(U||p) = sum 1/4 ln((1/4)/p_v)
    #   = 1/4 ln(1/2) + 3/4 ln(6/4) = -0.173287 + 0.304099 = 0.130812
    logits = torch.log(torch.tensor([[[0.5, 1 / 6, 1 / 6, 1 / 6]]]))
    assert token_self_certainty(logits).item() == pytest.approx(0.130812, abs=1e-5)


def test_rewards_average_only_completion_tokens():
    # token 0 uniform (H = ln 4), token 1 peaked (H ~ 0), token 2 padding (uniform, must not count)
    logits = torch.tensor([[[0.0] * 4, [0.0, -1e9, -1e9, -1e9], [0.0] * 4]])
    mask = torch.tensor([[1, 1, 0]])
    assert entropy_rewards(logits, mask).item() == pytest.approx(-math.log(4) / 2, abs=1e-6)
    # self-certainty of a near-one-hot token is huge (~ -ln4 + 0.75 * 1e9); the padded uniform one is 0
    sc = self_certainty_rewards(logits, mask).item()
    assert sc > 1e8
    assert masked_mean(torch.tensor([[1.0, 2.0]]), torch.tensor([[0, 0]])).item() == 0.0


def test_more_confident_completions_earn_more():
    confident = torch.tensor([[[5.0, 0.0, 0.0]]])
    unsure = torch.tensor([[[0.5, 0.0, 0.0]]])
    mask = torch.ones(1, 1)
    assert entropy_rewards(confident, mask) > entropy_rewards(unsure, mask)
    assert self_certainty_rewards(confident, mask) > self_certainty_rewards(unsure, mask)


def test_ema_update_by_hand():
    # ema = m * ema + (1 - m) * online; m = 0.9: 0.9 * 1 + 0.1 * 3 = 1.2
    ema, online = torch.nn.Linear(1, 1, bias=False), torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        ema.weight.fill_(1.0)
        online.weight.fill_(3.0)
    ema_update(ema, online, momentum=0.9)
    assert ema.weight.item() == pytest.approx(1.2)
    assert online.weight.item() == 3.0
