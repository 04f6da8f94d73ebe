import torch


def attention_entropy(weights):
    # H = -sum p log p, with 0 log 0 = 0
    nz = weights > 0
    logp = torch.zeros_like(weights)
    logp[nz] = torch.log10(weights[nz])
    return -(weights * logp).sum(dim=-1)


def strided_mask(num_tokens, stride, device=None):
    if num_tokens < 1 or stride < 1:
        raise ValueError("num_tokens and stride must be >= 1")
    i = torch.arange(num_tokens, device=device)[:, None]
    j = torch.arange(num_tokens, device=device)[None, :]
    back = i - j
    allowed = (back >= 0) & ((back < stride) | (back % stride == 0))
    return ~allowed
