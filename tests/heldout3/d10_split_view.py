import torch


def split_heads(x, num_heads):
    b, num_tokens, d = x.shape
    if d % num_heads != 0:
        raise ValueError("d must be divisible by num_heads")
    head_dim = d // num_heads
    return x.view(b, num_heads, num_tokens, head_dim)


def merge_heads(x):
    b, h, t, hd = x.shape
    return x.transpose(1, 2).contiguous().view(b, t, h * hd)
