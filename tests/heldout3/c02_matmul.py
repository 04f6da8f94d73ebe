import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=1)


def apply_causal_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError("scores must be square in the last two dims")
    mask = causal_mask(scores.shape[-1], device=scores.device)
    return scores.masked_fill(mask, float("-inf"))


def renormalize_masked_weights(weights):
    t = weights.shape[-1]
    keep = torch.tril(torch.ones(t, t, dtype=torch.bool, device=weights.device))
    masked = weights * keep
    row_sums = masked.sum(dim=-1, keepdim=True)
    return masked / row_sums


def softmax_with_temperature(scores, temperature, dim=-1):
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    z = scores / temperature
    zmax = z.amax(dim=dim, keepdim=True)
    zmax = torch.where(torch.isinf(zmax), torch.zeros_like(zmax), zmax)
    ex = torch.exp(z - zmax)
    total = ex.sum(dim=dim, keepdim=True)
    total = torch.where(total == 0, torch.ones_like(total), total)
    return ex / total


def dropout_scale(weights, keep_mask, p):
    if not 0 <= p <= 1:
        raise ValueError("p must be in [0, 1]")
    if p == 1:
        return weights * 0
    return weights * keep_mask / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if not 0 <= p <= 1:
        raise ValueError("p must be in [0, 1]")
    if not training or p == 0:
        return weights
    if p == 1:
        return weights * 0
    keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= p
    return weights * keep / (1 - p)
