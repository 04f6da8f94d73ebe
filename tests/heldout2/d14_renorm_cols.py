import torch


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    keep = torch.tril(torch.ones(T, T, dtype=weights.dtype, device=weights.device))
    masked = weights * keep
    return masked / masked.sum(dim=-2, keepdim=True)


def dropout_scale(weights, keep_mask, p):
    if p == 1:
        return torch.zeros_like(weights)
    return weights * keep_mask / (1 - p)
