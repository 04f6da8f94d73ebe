"""Public tests: splitting the feature dimension into heads, and merging the heads back."""

import pytest
import torch

from exercises._expect import expect, expect_close, expect_raises, f64, like, rand
from grader.rules import contiguous_message


def heads_oracle(x, num_heads):
    """(b, T, d) -> (b, H, T, d/H) by slicing columns: head h gets [h*hd, (h+1)*hd)."""
    x = f64(x)
    head_dim = x.shape[-1] // num_heads
    return torch.stack([x[..., h * head_dim : (h + 1) * head_dim] for h in range(num_heads)], dim=1)


# name: (b, T, d, H, make x non-contiguous); heads != tokens != head_dim
HEAD_CASES = {
    "b=2 T=3 d=10 H=2": (2, 3, 10, 2, False),
    "b=1 T=5 d=12 H=3": (1, 5, 12, 3, False),
    "b=2 T=4 d=6 H=1": (2, 4, 6, 1, False),
    "non-contiguous x": (2, 3, 12, 4, True),
}


def heads_input(case, dtype, device):
    b, num_tokens, d, _, transposed = HEAD_CASES[case]
    if transposed:  # a (b, d, T) tensor viewed as (b, T, d)
        return rand(b, d, num_tokens, seed=31, dtype=dtype, device=device).transpose(1, 2)
    return rand(b, num_tokens, d, seed=31, dtype=dtype, device=device)


@pytest.mark.exercise("split_heads")
@pytest.mark.parametrize("case", HEAD_CASES)
def test_split_heads(solution, case, dtype, device):
    x = heads_input(case, dtype, device)
    num_heads = HEAD_CASES[case][3]
    got = solution.split_heads(x, num_heads)
    expect_close(got, like(heads_oracle(x, num_heads), x), case)


@pytest.mark.exercise("split_heads")
def test_split_heads_rejects_uneven(solution, dtype, device):
    x = rand(2, 3, 10, seed=32, dtype=dtype, device=device)
    expect_raises(ValueError, "d=10, H=4", solution.split_heads, x, 4)


@pytest.mark.exercise("merge_heads")
@pytest.mark.parametrize("case", HEAD_CASES)
def test_merge_heads_undoes_the_split(solution, case, dtype, device):
    x = heads_input(case, dtype, device)
    heads = like(heads_oracle(x, HEAD_CASES[case][3]), x)  # (b, H, T, hd), split by slicing
    got = solution.merge_heads(heads)
    expect_close(got, x.contiguous(), case)
    expect(got.is_contiguous(), case, contiguous_message("merge_heads"))


@pytest.mark.exercise("merge_heads")
def test_merge_heads_literal(solution, dtype, device):
    # two heads, two tokens, head_dim 3: token t's row is head 0's row t, then head 1's row t
    heads = torch.tensor(
        [[[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]]], dtype=dtype, device=device
    )  # (1, 2, 2, 3)
    expected = torch.tensor([[[1, 2, 3, 7, 8, 9], [4, 5, 6, 10, 11, 12]]], dtype=dtype, device=device)
    expect_close(solution.merge_heads(heads), expected, "H=2 T=2 hd=3 by hand")
