import torch


def split_heads(x, num_heads):
    b, T, d = x.shape
    if d % num_heads:
        raise ValueError("d must be divisible by num_heads")
    hd = d // num_heads
    return x.reshape(b, T, num_heads, hd).permute(0, 2, 1, 3)


def merge_heads(x):
    b, H, T, hd = x.shape
    # (b, H, T, hd) -> (b, T, H*hd)
    return x.contiguous().view(b, T, H * hd)
