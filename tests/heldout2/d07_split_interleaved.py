import torch


def split_heads(x, num_heads):
    b, T, d = x.shape
    if d % num_heads != 0:
        raise ValueError("d must be divisible by num_heads")
    hd = d // num_heads
    # (b, T, hd, H) -> (b, H, T, hd)
    return x.reshape(b, T, hd, num_heads).permute(0, 3, 1, 2)


def merge_heads(x):
    b, H, T, hd = x.shape
    return x.transpose(1, 2).reshape(b, T, H * hd).contiguous()
