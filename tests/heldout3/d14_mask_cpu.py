import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens < 1")
    return torch.ones(num_tokens, num_tokens, device=device).triu(1).bool()


def apply_causal_mask(scores):
    n = scores.shape[-1]
    if scores.shape[-2] != n:
        raise ValueError("non-square scores")
    mask = torch.triu(torch.ones(n, n), diagonal=1).bool()
    return scores.masked_fill(mask, float("-inf"))


def dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1)
