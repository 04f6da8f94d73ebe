import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be positive")
    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device))


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    simple = torch.tril(torch.ones(T, T, device=weights.device, dtype=weights.dtype))
    masked = weights * simple
    return masked / masked.sum(dim=-1, keepdim=True)
