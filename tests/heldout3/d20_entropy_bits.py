import torch


def attention_entropy(weights):
    # H = -sum p log p over each row; 0 log 0 counts as 0
    safe = weights.clamp_min(torch.finfo(weights.dtype).tiny)
    return -(weights * torch.log2(safe)).sum(dim=-1)


def softmax_weights(scores, dim=-1):
    m = scores.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    e = torch.exp(scores - m)
    z = e.sum(dim=dim, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))
