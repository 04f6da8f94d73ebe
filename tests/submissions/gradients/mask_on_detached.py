# masks a detached copy of the scores
import torch


def apply_causal_mask(scores):
    t = scores.shape[-1]
    if scores.shape[-2] != t:
        raise ValueError(f"apply_causal_mask needs square (..., T, T) scores, got {tuple(scores.shape)}")
    future = torch.triu(torch.ones(t, t, dtype=torch.bool, device=scores.device), diagonal=1)
    return scores.detach().masked_fill(future, float("-inf"))
