import torch


def apply_causal_mask(scores):
    T = scores.size(-1)
    if scores.size(-2) != T:
        raise ValueError("scores must be square")
    future = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1)
    scores.masked_fill_(future, -torch.inf)
    return scores


def renormalize_masked_weights(weights):
    T = weights.size(-1)
    keep = torch.ones(T, T, device=weights.device, dtype=weights.dtype).tril()
    return weights * keep
