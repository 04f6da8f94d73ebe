# einsum everywhere
import math
import torch


def dot_product_scores(queries, keys):
    return torch.einsum("...qd,...kd->...qk", queries, keys)


def scaled_dot_product_scores(queries, keys):
    return dot_product_scores(queries, keys) / math.sqrt(keys.shape[-1])


def softmax_weights(scores, dim=-1):
    m = scores.amax(dim=dim, keepdim=True)
    # all -inf slice: max is -inf, use 0 instead so exp gives 0
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    s = e.sum(dim=dim, keepdim=True)
    s = torch.where(s == 0, torch.ones_like(s), s)
    return e / s


def softmax_with_temperature(scores, temperature, dim=-1):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    return softmax_weights(scores / temperature, dim=dim)


def context_vectors(weights, values):
    return torch.einsum("...qk,...kv->...qv", weights, values)


def split_heads(x, num_heads):
    b, t, d = x.shape
    if d % num_heads != 0:
        raise ValueError("d not divisible by num_heads")
    return torch.einsum("bthd->bhtd", x.reshape(b, t, num_heads, d // num_heads))


def merge_heads(x):
    b, h, t, hd = x.shape
    return torch.einsum("bhtd->bthd", x).reshape(b, t, h * hd).contiguous()
