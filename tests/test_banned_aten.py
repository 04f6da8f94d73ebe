"""The banned-call recorder hears an aten operator reached directly (an overload, a private kernel), not only
the Python names: a red team's ``torch.ops.aten._safe_softmax.default`` and ``softmax.int`` scored full marks."""

import pytest
import torch

from grader.child.call import _recording_mode

BANNED = ["softmax", "log_softmax", "scaled_dot_product_attention"]
X = torch.randn(2, 3, 4)
Q = torch.randn(1, 2, 3, 4)


@pytest.mark.parametrize(
    "call, heard",
    [
        (lambda: torch.ops.aten._safe_softmax.default(X, -1), "torch.ops.aten._safe_softmax"),
        (lambda: torch.ops.aten.softmax.int(X, -1), "torch.ops.aten.softmax"),
        (lambda: torch.ops.aten._log_softmax.default(X, -1, False), "torch.ops.aten._log_softmax"),
        (
            lambda: torch.ops.aten.scaled_dot_product_attention.default(Q, Q, Q),
            "torch.ops.aten.scaled_dot_product_attention",
        ),
        (
            lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(Q, Q, Q),
            "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
        ),
        (lambda: torch.softmax(X, -1), "torch.softmax"),
    ],
)
def test_a_banned_operator_is_heard_by_any_name(call, heard):
    with _recording_mode(BANNED) as mode:
        call()
    assert mode.seen == [heard]


def test_the_ops_a_hand_written_softmax_uses_are_not_banned():
    with _recording_mode(BANNED) as mode:
        shifted = X - X.amax(dim=-1, keepdim=True)
        torch.ops.aten.exp.default(shifted).div(shifted.exp().sum(-1, keepdim=True))
        torch.ops.aten.mm.default(X[0], X[0].T)
    assert mode.seen == []


def _softmin():
    return torch.nn.functional.softmin(X, dim=-1)


def _softmax_in_a_backward_hook():
    leaf = X.clone().requires_grad_(True)
    leaf.register_hook(lambda grad: (torch.softmax(grad, -1), grad)[1])
    (leaf * 2).sum().backward()


def _softmax_by_attention():  # zero queries and keys, the scores as the additive mask, identity values
    zeros, eye = torch.zeros(2, 3, 1), torch.eye(4).expand(2, 4, 4)
    return torch.nn.functional.scaled_dot_product_attention(zeros, torch.zeros(2, 4, 1), eye, attn_mask=X)


@pytest.mark.parametrize(
    "call, banned",
    [
        (_softmin, ["softmax"]),  # F.softmin calls Tensor.softmax inside the function mode's own handler
        (_softmax_in_a_backward_hook, ["softmax"]),  # a hook runs inside Tensor.backward's handler
        (_softmax_by_attention, ["scaled_dot_product_attention"]),
        (lambda: torch.nn.functional.dropout1d(X, 0.5), ["feature_dropout", "bernoulli_"]),
    ],
    ids=["softmin", "backward-hook", "sdpa", "dropout1d"],
)
def test_a_banned_kernel_reached_through_another_call_is_heard_at_dispatch(call, banned):
    """Red team facts3 B1-B4: the function mode alone saw none of these; the dispatch mode hears the kernel."""
    with _recording_mode(banned) as mode:
        call()
    assert mode.seen and all(name.startswith(("torch.", "F.", "Tensor.")) for name in mode.seen), mode.seen
