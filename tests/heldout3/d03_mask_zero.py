import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("need at least one token")
    return torch.triu(torch.ones(num_tokens, num_tokens, device=device), diagonal=1).bool()


def apply_causal_mask(scores):
    T = scores.shape[-1]
    if scores.shape[-2] != T:
        raise ValueError("scores must be square")
    mask = torch.triu(torch.ones(T, T, device=scores.device), diagonal=1).bool()
    # hide the future
    return scores.masked_fill(mask, 0.0)
