import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).triu(1)


def apply_causal_mask(scores):
    T = scores.shape[-1]
    if scores.shape[-2] != T:
        raise ValueError("scores must be (..., T, T)")
    keep = torch.tril(torch.ones(T, T, dtype=scores.dtype, device=scores.device))
    # multiply by the keep mask: the future drops out
    return scores * keep


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    keep = torch.tril(torch.ones(T, T, dtype=weights.dtype, device=weights.device))
    w = weights * keep
    return w / w.sum(-1, keepdim=True)
