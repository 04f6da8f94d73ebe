import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be at least 1")
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=1)


def apply_causal_mask(scores):
    T = scores.shape[-1]
    if scores.shape[-2] != T:
        raise ValueError("the last two dimensions of scores must be equal")
    return scores.masked_fill(causal_mask(T, device=scores.device), -torch.inf)


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    simple_mask = torch.tril(torch.ones(T, T, dtype=weights.dtype, device=weights.device))
    masked = weights * simple_mask
    return masked / masked.sum(dim=-1, keepdim=True)
