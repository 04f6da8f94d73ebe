# Erin -- part 2: causal masking
import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError(f"num_tokens={num_tokens}: need at least one token")
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).triu(diagonal=1)


def apply_causal_mask(scores):
    *_, rows, cols = scores.shape
    if rows != cols:
        raise ValueError(f"scores of shape {tuple(scores.shape)} are not square")
    return scores.masked_fill(causal_mask(rows, device=scores.device), float("-inf"))


def renormalize_masked_weights(weights):
    keep = ~causal_mask(weights.shape[-1], device=weights.device)
    w = weights * keep
    return w / w.sum(-1, keepdim=True)
