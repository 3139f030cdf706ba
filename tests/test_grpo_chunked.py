"""Chunked log-probs (grpo.chunked_token_logprobs) equal the unchunked ones, in values
and in gradients, and never hold more than one chunk of logits."""

import pytest
import torch

from corl.grpo import chunked_token_logprobs, nucleus_logits, token_logprobs

N, T, H, V = 3, 7, 5, 11


def setup(seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(N, T, H, generator=g, dtype=torch.float64, requires_grad=True)
    head = torch.nn.Linear(H, V, bias=True).double()
    with torch.no_grad():
        head.weight.copy_(torch.randn(V, H, generator=g))
        head.bias.copy_(torch.randn(V, generator=g))
    tokens = torch.randint(0, V, (N, T), generator=g)
    return hidden, head, tokens


def grads(hidden, head, lp):
    # a loss that weighs positions differently, so that a misplaced chunk would show
    weights = torch.arange(1.0, T + 1, dtype=lp.dtype)
    (lp * weights).sum().backward()
    return [hidden.grad.clone(), head.weight.grad.clone(), head.bias.grad.clone()]


@pytest.mark.parametrize("chunk", [1, 2, 3, 6, 7, None])
def test_chunked_equals_unchunked_values_and_gradients(chunk):
    hidden, head, tokens = setup()
    expected = token_logprobs(head(hidden), tokens, 0.7)
    expected_grads = grads(hidden, head, expected)

    hidden2, head2, _ = setup()
    got = chunked_token_logprobs(hidden2, head2, tokens, 0.7, chunk=chunk)
    assert got.shape == (N, T)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    for g, e in zip(grads(hidden2, head2, got), expected_grads, strict=True):
        torch.testing.assert_close(g, e, rtol=0, atol=1e-12)


class WidthRecorder(torch.nn.Module):
    """A head that remembers the most positions it was ever given at once."""

    def __init__(self, head):
        super().__init__()
        self.head, self.widest = head, 0

    def forward(self, h):
        self.widest = max(self.widest, h.shape[1])
        return self.head(h)


def test_the_head_only_ever_sees_one_chunk_forward_and_backward():
    hidden, head, tokens = setup()
    rec = WidthRecorder(head)
    lp = chunked_token_logprobs(hidden, rec, tokens, chunk=3)
    lp.sum().backward()  # the recomputation in the backward goes through the head too
    assert rec.widest == 3


def test_autograd_keeps_no_full_logits():
    """Saved-for-backward tensors: the unchunked function keeps [N, T, V] logits; the
    chunked one keeps nothing of vocabulary size (the chunks recompute them)."""

    def largest_saved(fn) -> int:
        sizes = [0]

        def pack(t):
            sizes.append(t.numel())
            return t

        hidden, head, tokens = setup()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn(hidden, head, tokens)
        return max(sizes)

    assert largest_saved(lambda h, m, t: token_logprobs(m(h), t)) >= N * T * V
    assert largest_saved(lambda h, m, t: chunked_token_logprobs(h, m, t, chunk=2)) < N * 2 * V


def test_without_grad_chunks_give_the_same_values():
    hidden, head, tokens = setup()
    with torch.no_grad():
        torch.testing.assert_close(
            chunked_token_logprobs(hidden, head, tokens, chunk=4), token_logprobs(head(hidden), tokens), rtol=0, atol=1e-12
        )


# -- the sampler's nucleus (top-p): the trainer scores the distribution that was sampled ------------------


def test_nucleus_logprobs_by_hand():
    """Probabilities 0.5, 0.3, 0.15, 0.05 (logits = their logs), top_p 0.75. Sorted ascending,
    the cumulative masses are 0.05, 0.20, 0.50, 1.00: the two tokens at or below 1 - 0.75 = 0.25
    leave, the nucleus is {0.5, 0.3} (mass 0.8), renormalised to 0.625 and 0.375, as vLLM's
    processed_logprobs report them. A sampled token outside the trainer's nucleus (a forward
    that differs in the last bits at the edge) stays in: token 2 scores 0.15 / (0.8 + 0.15).
    At temperature 2 the probabilities go as sqrt(p) (sum 1.8657): cumulative 0.120, 0.327, ...,
    so only the last token leaves and token 0 scores sqrt(.5) / (sqrt(.5) + sqrt(.3) + sqrt(.15))."""
    p = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
    logits = p.log().view(1, 1, 4).expand(1, 3, 4)  # [N=1, T=3, V=4]
    tokens = torch.tensor([[0, 1, 2]])
    got = token_logprobs(logits, tokens, 1.0, top_p=0.75)
    expected = torch.tensor([[0.625, 0.375, 0.15 / 0.95]]).log()
    torch.testing.assert_close(got.double(), expected.double(), rtol=0, atol=1e-6)
    full = token_logprobs(logits, tokens, 1.0)  # top_p 1: the whole softmax, as before
    torch.testing.assert_close(full.double(), p[[0, 1, 2]].log().view(1, 3), rtol=0, atol=1e-6)
    root = p.sqrt()
    warm = token_logprobs(logits[:, :1], tokens[:, :1], 2.0, top_p=0.75)
    torch.testing.assert_close(warm.double(), (root[0] / root[:3].sum()).log().view(1, 1), rtol=0, atol=1e-6)
    # the kept set is vLLM's rule exactly: ties and "at most 1 - p" included
    assert nucleus_logits(p.log().float().view(1, 4), 0.75).isinf().tolist() == [[False, False, True, True]]


@pytest.mark.parametrize("chunk", [1, 3, None])
def test_chunked_nucleus_equals_unchunked_values_and_gradients(chunk):
    """With top_p < 1 the chunked head gives the same log-probs and gradients (the kept set is a
    constant; the kept logits carry the gradient, the dropped ones none)."""
    hidden, head, tokens = setup()
    expected = token_logprobs(head(hidden), tokens, 0.7, top_p=0.6)
    expected_grads = grads(hidden, head, expected)
    hidden2, head2, _ = setup()
    got = chunked_token_logprobs(hidden2, head2, tokens, 0.7, chunk=chunk, top_p=0.6)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    assert (got > token_logprobs(head(hidden).detach(), tokens, 0.7)).any()  # the nucleus changed something
    for g, e in zip(grads(hidden2, head2, got), expected_grads, strict=True):
        torch.testing.assert_close(g, e, rtol=0, atol=1e-12)
