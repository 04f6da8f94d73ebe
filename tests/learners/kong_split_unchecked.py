# Kong -- heads / mask / dropout helpers
import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens < 1")
    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool), diagonal=1)


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError("p out of range")
    return weights * keep_mask.to(weights.dtype) / (1 - p)


def split_heads(x, num_heads):
    b, t, d = x.shape
    head_dim = d // num_heads
    return x.reshape(b, t, num_heads, head_dim).transpose(1, 2)


def merge_heads(x):
    b, h, t, hd = x.shape
    return x.transpose(1, 2).reshape(b, t, h * hd)


if __name__ == "__main__":
    x = torch.randn(2, 5, 12)
    print(merge_heads(split_heads(x, 3)).equal(x))
