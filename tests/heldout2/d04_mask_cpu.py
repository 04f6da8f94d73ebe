import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens < 1")
    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device), diagonal=1)


def apply_causal_mask(scores):
    T = scores.shape[-1]
    if scores.shape[-2] != T:
        raise ValueError("not square")
    mask = torch.triu(torch.ones(T, T), diagonal=1)
    return scores.masked_fill(mask.bool(), -torch.inf)


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    mask_simple = torch.tril(torch.ones(T, T, device=weights.device, dtype=weights.dtype))
    masked_simple = weights * mask_simple
    row_sums = masked_simple.sum(dim=-1, keepdim=True)
    return masked_simple / row_sums
