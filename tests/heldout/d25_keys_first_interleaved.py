import torch


def dot_product_scores(queries, keys):
    return torch.matmul(keys, queries.transpose(-1, -2))


def split_heads(x, num_heads):
    b, T, d = x.shape
    if d % num_heads:
        raise ValueError("d % num_heads != 0")
    return x.view(b, T, d // num_heads, num_heads).permute(0, 3, 1, 2)
