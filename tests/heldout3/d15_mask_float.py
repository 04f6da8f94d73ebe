import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    mask = torch.triu(torch.ones(num_tokens, num_tokens, device=device), diagonal=1)
    return mask


def apply_causal_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError("scores must be square")
    m = torch.triu(torch.ones(scores.shape[-1], scores.shape[-1], device=scores.device), diagonal=1)
    return scores.masked_fill(m.bool(), -torch.inf)


def renormalize_masked_weights(weights):
    n = weights.shape[-1]
    m = torch.triu(torch.ones(n, n, device=weights.device), diagonal=1).bool()
    w = weights.masked_fill(m, 0.0)
    return w / w.sum(-1, keepdim=True)
