# softmax / dropout written out by hand, checked against torch in a notebook first
import torch


def softmax_weights(scores, dim=-1):
    # shift by the row max (an all -inf row is shifted by 0), exp, normalise
    top = scores.max(dim=dim, keepdim=True).values
    top = top.masked_fill(torch.isneginf(top), 0.0)
    num = torch.exp(scores - top)
    return num / num.sum(dim=dim, keepdim=True).clamp(min=torch.finfo(scores.dtype).tiny)


def softmax_with_temperature(scores, temperature, dim=-1):
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, not {temperature}")
    z = scores / temperature
    zmax = z.max(dim=dim, keepdim=True).values
    zmax = zmax.masked_fill(zmax == -torch.inf, 0.0)
    num = (z - zmax).exp()
    den = num.sum(dim=dim, keepdim=True)
    return num / den.clamp(min=torch.finfo(z.dtype).tiny)


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError("p must lie in [0, 1]")
    if p == 1.0:
        return weights * 0.0
    scale = 1.0 / (1.0 - p)
    return torch.where(keep_mask.bool(), weights * scale, torch.zeros_like(weights))


def attention_dropout(weights, p, training=True, generator=None):
    if not training or p == 0:
        return weights.clone()
    u = torch.rand(weights.shape, generator=generator, device=weights.device)
    keep = u >= p
    return dropout_scale(weights, keep, p)


if __name__ == "__main__":
    torch.manual_seed(123)
    x = torch.randn(2, 5)
    print(softmax_weights(x), torch.softmax(x, dim=-1))
