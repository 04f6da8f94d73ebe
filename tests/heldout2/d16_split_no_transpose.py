import torch


def split_heads(x, num_heads):
    b, T, d = x.shape
    if d % num_heads != 0:
        raise ValueError("d must be a multiple of num_heads")
    # (b, T, d) -> (b, T, H, hd)
    return x.view(b, T, num_heads, d // num_heads)


def merge_heads(x):
    b, H, T, hd = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(b, T, H * hd)
