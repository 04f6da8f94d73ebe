# einsum everywhere, it reads like the maths
import math
import torch


def dot_product_scores(queries, keys):
    return torch.einsum("...qd,...kd->...qk", queries, keys)


def scaled_dot_product_scores(queries, keys):
    d_k = keys.shape[-1]
    return torch.einsum("...qd,...kd->...qk", queries, keys) / math.sqrt(d_k)


def softmax_weights(scores, dim=-1):
    m = scores.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    s = e.sum(dim=dim, keepdim=True)
    s = torch.where(s > 0, s, torch.ones_like(s))
    return e / s


def context_vectors(weights, values):
    return torch.einsum("...qk,...kv->...qv", weights, values)


def split_heads(x, num_heads):
    b, t, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d={d} is not divisible by num_heads={num_heads}")
    return torch.einsum("bthe->bhte", x.reshape(b, t, num_heads, d // num_heads))


def merge_heads(x):
    b, h, t, e = x.shape
    return torch.einsum("bhte->bthe", x).reshape(b, t, h * e).contiguous()
