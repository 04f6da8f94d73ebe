import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    i = torch.arange(num_tokens, device=device).unsqueeze(-1)
    j = torch.arange(num_tokens, device=device).unsqueeze(0)
    # query i may look at key j when j <= i
    return i >= j


def apply_causal_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError("not square")
    T = scores.shape[-1]
    i = torch.arange(T, device=scores.device).unsqueeze(-1)
    j = torch.arange(T, device=scores.device).unsqueeze(0)
    return scores.masked_fill(j > i, float("-inf"))
