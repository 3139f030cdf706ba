"""Chunked log-probs (grpo.chunked_token_logprobs) equal the unchunked ones, in values
and in gradients, and never hold more than one chunk of logits."""

import pytest
import torch

from corl.grpo import chunked_token_logprobs, token_logprobs

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
