"""Public tests: the self-attention, causal-attention and multi-head attention modules.

Each module is checked two ways: the chapter's printed numbers (a fixed seed
and the six-token input), and an independent computation with the module's
own weights (torch's scaled_dot_product_attention, in float64).
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from exercises._expect import (
    chapter_inputs,
    english,
    expect,
    expect_close,
    expect_raises_preferring,
    expect_shape,
    f64,
    like,
    rand,
)

CHAPTER_ATOL = 1e-4  # the chapter prints 4 decimals


def built(module, case, dtype, device):
    """The module on the device and dtype under test, after checking it is an nn.Module."""
    expect(isinstance(module, nn.Module), case, f"expected an nn.Module, got {type(module).__name__}")
    return module.to(device=device, dtype=dtype)


def projection(module, name, case):
    """Apply the module's nn.Linear `name` in float64: a function x -> x W^T + b."""
    layer = dict(module.named_children()).get(name)
    expect(isinstance(layer, nn.Linear), case, f"the module needs an nn.Linear attribute {name}, got {layer!r}")
    weight = f64(layer.weight)
    bias = None if layer.bias is None else f64(layer.bias)
    return lambda x: F.linear(f64(x), weight, bias)


def attention_oracle(module, x, is_causal, case):
    """softmax(Q K^T / sqrt(d_out) [+ causal mask]) V with the module's weights, float64."""
    q, k, v = (projection(module, name, case)(x) for name in ("W_query", "W_key", "W_value"))
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


def multihead_oracle(module, x, num_heads, case):
    """Causal attention per head on its slice of columns, heads concatenated, then out_proj."""
    q, k, v = (projection(module, name, case)(x) for name in ("W_query", "W_key", "W_value"))
    head_dim = q.shape[-1] // num_heads
    heads = [
        F.scaled_dot_product_attention(*(t[..., h * head_dim : (h + 1) * head_dim] for t in (q, k, v)), is_causal=True)
        for h in range(num_heads)
    ]
    return projection(module, "out_proj", case)(torch.cat(heads, dim=-1))


def chapter_batch(dtype, device):
    inputs = chapter_inputs(dtype, device)
    return torch.stack((inputs, inputs))  # (2, 6, 3)


def expect_mask_buffer(module, context_length, case, device):
    """A persistent (context_length, context_length) buffer "mask", True above the diagonal, moved by .to()."""
    buffers = dict(module.to(device).named_buffers())
    found = english("mask_buffer.found", buffers=", ".join(buffers)) if buffers else ""
    expect("mask" in buffers, case, english("mask_buffer.missing", found=found))  # the grader's words
    mask = buffers["mask"]
    expect_shape(mask, (context_length, context_length), f"{case}, mask")
    where = mask.device.type
    expect(where == torch.device(device).type, case, english("mask_buffer.device", where=where, device=device))
    expected = torch.ones(context_length, context_length, dtype=torch.bool, device=mask.device).triu(1)
    expect_close(mask.bool(), expected, f"{case}, mask is True above the diagonal")
    expect("mask" in module.state_dict(), case, english("mask_buffer.not_saved"))


# --- SelfAttention -------------------------------------------------------------------------


@pytest.mark.exercise("make_self_attention")
@torch.no_grad()
def test_self_attention_chapter_numbers(solution, dtype, device):
    case = "chapter, seed 789"
    torch.manual_seed(789)
    sa = built(solution.make_self_attention(3, 2), case, dtype, device)
    got = sa(chapter_inputs(dtype, device))
    expect_shape(got, (6, 2), case)
    expected = [[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702], [-0.0760, 0.0685], [-0.0763, 0.0679]]
    expected.append([-0.0754, 0.0693])
    expect_close(got, torch.tensor(expected, dtype=dtype, device=device), case, atol=CHAPTER_ATOL, rtol=0)


@pytest.mark.exercise("make_self_attention")
@pytest.mark.parametrize(
    "case, d_in, d_out, shape, qkv_bias",
    [
        ("batched d_in=5 d_out=3", 5, 3, (2, 4, 5), False),
        ("unbatched d_in=3 d_out=4", 3, 4, (6, 3), False),
        ("qkv_bias d_in=4 d_out=6", 4, 6, (3, 5, 4), True),
    ],
    ids=["batched", "unbatched", "qkv_bias"],
)
@torch.no_grad()
def test_self_attention(solution, case, d_in, d_out, shape, qkv_bias, dtype, device):
    torch.manual_seed(41)
    sa = built(solution.make_self_attention(d_in, d_out, qkv_bias=qkv_bias), case, dtype, device)
    x = rand(*shape, seed=42, dtype=dtype, device=device)
    expect_close(sa(x), like(attention_oracle(sa, x, False, case), x), case)


# --- CausalAttention -----------------------------------------------------------------------


@pytest.mark.exercise("make_causal_attention")
@torch.no_grad()
def test_causal_attention_chapter_numbers(solution, dtype, device):
    case = "chapter, seed 123"
    torch.manual_seed(123)
    ca = built(solution.make_causal_attention(3, 2, 6, 0.0), case, dtype, device)
    got = ca(chapter_batch(dtype, device))
    expect_shape(got, (2, 6, 2), case)
    expected = [[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632], [-0.5675, -0.0843], [-0.5526, -0.0981]]
    expected.append([-0.5299, -0.1081])
    expected = torch.tensor([expected, expected], dtype=dtype, device=device)
    expect_close(got, expected, case, atol=CHAPTER_ATOL, rtol=0)


@pytest.mark.exercise("make_causal_attention")
@pytest.mark.parametrize(
    "case, d_in, d_out, context_length, dropout, shape, qkv_bias",
    [
        ("d_in=5 d_out=3 T=4 < context 7", 5, 3, 7, 0.0, (2, 4, 5), False),
        ("eval with dropout=0.3", 4, 6, 5, 0.3, (3, 5, 4), False),
        ("qkv_bias T=1", 3, 5, 6, 0.0, (2, 1, 3), True),
    ],
    ids=["T<context", "eval-dropout", "qkv_bias-T=1"],
)
@torch.no_grad()
def test_causal_attention(solution, case, d_in, d_out, context_length, dropout, shape, qkv_bias, dtype, device):
    torch.manual_seed(43)
    ca = solution.make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=qkv_bias)
    ca = built(ca, case, dtype, device).eval()
    x = rand(*shape, seed=44, dtype=dtype, device=device)
    expect_close(ca(x), like(attention_oracle(ca, x, True, case), x), case)


@pytest.mark.exercise("make_causal_attention")
def test_causal_attention_mask_buffer(solution, device):
    case = "context_length=5"
    expect_mask_buffer(solution.make_causal_attention(3, 4, 5, 0.0), 5, case, device)


# --- MultiHeadAttention -------------------------------------------------------------------


@pytest.mark.exercise("make_multihead_attention")
@torch.no_grad()
def test_multihead_attention_chapter_numbers(solution, dtype, device):
    case = "chapter, seed 123, 2 heads"
    torch.manual_seed(123)
    mha = built(solution.make_multihead_attention(3, 2, 6, 0.0, num_heads=2), case, dtype, device)
    got = mha(chapter_batch(dtype, device))
    expect_shape(got, (2, 6, 2), case)
    expected = [[0.3190, 0.4858], [0.2943, 0.3897], [0.2856, 0.3593], [0.2693, 0.3873], [0.2639, 0.3928]]
    expected.append([0.2575, 0.4028])
    expected = torch.tensor([expected, expected], dtype=dtype, device=device)
    expect_close(got, expected, case, atol=CHAPTER_ATOL, rtol=0)


@pytest.mark.exercise("make_multihead_attention")
@pytest.mark.parametrize(
    "case, d_in, d_out, context_length, num_heads, shape, qkv_bias",
    [
        ("H=2 hd=3 T=4 d_in=5", 5, 6, 7, 2, (2, 4, 5), False),
        ("H=3 hd=4 T=5 qkv_bias", 4, 12, 5, 3, (3, 5, 4), True),
    ],
    ids=["H=2", "H=3-qkv_bias"],
)
@torch.no_grad()
def test_multihead_attention(solution, case, d_in, d_out, context_length, num_heads, shape, qkv_bias, dtype, device):
    torch.manual_seed(45)
    mha = solution.make_multihead_attention(d_in, d_out, context_length, 0.2, num_heads, qkv_bias=qkv_bias)
    mha = built(mha, case, dtype, device).eval()
    x = rand(*shape, seed=46, dtype=dtype, device=device)
    expect_close(mha(x), like(multihead_oracle(mha, x, num_heads, case), x), case)


@pytest.mark.exercise("make_multihead_attention")
def test_multihead_attention_structure(solution, device):
    case = "d_in=4 d_out=6 H=3 context 5"
    mha = solution.make_multihead_attention(4, 6, 5, 0.0, 3)
    expect_mask_buffer(mha, 5, case, device)
    count = sum(p.numel() for p in mha.parameters())
    expected = 3 * 4 * 6 + 6 * 6 + 6  # W_query, W_key, W_value without bias; out_proj with bias
    expect(count == expected, case, f"expected {expected} parameters (3 projections + out_proj), got {count}")


@pytest.mark.exercise("make_multihead_attention")
def test_multihead_attention_rejects_uneven_heads(solution):
    # the grader accepts any exception here (the chapter's assert), with a note that ValueError is better
    case = "d_out=10, num_heads=4"
    build = solution.make_multihead_attention
    expect_raises_preferring(ValueError, "prefer.value_error", case, build, 4, 10, 6, 0.0, 4)
