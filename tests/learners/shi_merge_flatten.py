"""Shi -- chapter 3 exercises, the head helpers.

I use permute + flatten for the heads; flatten(2) glues the last two dims together.
"""

import torch


def context_vectors(weights, values):
    return weights @ values


def split_heads(x, num_heads):
    b, num_tokens, d = x.shape
    if d % num_heads:
        raise ValueError(f"d={d} is not a multiple of num_heads={num_heads}")
    return x.view(b, num_tokens, num_heads, d // num_heads).permute(0, 2, 1, 3)


def merge_heads(x):
    # (b, H, T, hd) -> (b, T, H, hd) -> (b, T, H*hd)
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)


if __name__ == "__main__":
    torch.manual_seed(123)
    x = torch.randn(1, 6, 8)
    h = split_heads(x, 4)
    print(h.shape, torch.equal(merge_heads(h), x))
