import torch


def split_heads(x, num_heads):
    b, t, d = x.shape
    if d % num_heads:
        raise ValueError("d % num_heads != 0")
    return x.view(b, t, num_heads, d // num_heads).transpose(1, 2)


def merge_heads(x):
    b, h, t, hd = x.shape
    # Combine heads, where d_out = num_heads * head_dim
    return x.contiguous().view(b, t, h * hd)


def context_vectors(weights, values):
    return weights @ values
