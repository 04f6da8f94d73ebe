import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("need at least one token")
    # 1 above the diagonal = future
    return torch.triu(torch.ones(num_tokens, num_tokens, device=device), diagonal=1)


def apply_causal_mask(scores):
    T = scores.shape[-1]
    if scores.shape[-2] != T:
        raise ValueError("square scores expected")
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=scores.device), diagonal=1)
    return scores.masked_fill(mask, 0.0)
