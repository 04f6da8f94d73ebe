import torch


def split_heads(x, num_heads):
    b, num_tokens, d = x.shape
    head_dim = d // num_heads
    x = x.view(b, num_tokens, num_heads, head_dim)
    return x.transpose(1, 2)


def merge_heads(x):
    b, num_heads, num_tokens, head_dim = x.shape
    return x.transpose(1, 2).view(b, num_tokens, num_heads * head_dim)
