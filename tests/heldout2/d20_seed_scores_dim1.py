# 按教程：context_vector = softmax(q @ k.T / sqrt(d)) @ v
import torch


def dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1)


def scaled_dot_product_scores(queries, keys):
    # 缩放：除以 sqrt(维度)
    return dot_product_scores(queries, keys) / torch.sqrt(torch.tensor(queries.shape[-2], dtype=queries.dtype))


def softmax_weights(scores, dim=-1):
    # 数值稳定的 softmax
    m = scores.max(dim=1, keepdim=True).values
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(scores - m)
    s = e.sum(dim=1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be positive")
    return torch.triu(torch.ones(num_tokens, num_tokens, device=device)).bool()
