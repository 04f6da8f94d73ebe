import torch


def softmax_with_temperature(scores, temperature, dim=-1):
    scaled = scores / temperature
    mx = scaled.amax(dim=dim, keepdim=True)
    mx = torch.where(mx == float("-inf"), torch.zeros_like(mx), mx)
    ex = torch.exp(scaled - mx)
    denom = ex.sum(dim=dim, keepdim=True)
    return ex / torch.where(denom == 0, torch.ones_like(denom), denom)


def attention_dropout(weights, p, training=True, generator=None):
    if not training or p == 0:
        return weights
    u = torch.rand(weights.shape, device=weights.device, dtype=weights.dtype, generator=generator)
    keep = (u >= p).to(weights.dtype)
    return weights * keep / (1 - p)
