import torch


def dot_product_scores(queries, keys):
    # works for batches too: only swap the last two dims of keys
    return queries @ keys.transpose(-2, -1)


def scaled_dot_product_scores(queries, keys):
    return dot_product_scores(queries, keys) / keys.shape[-1] ** 0.5


def softmax_weights(scores, dim=-1):
    # like the chapter: attn_weights = torch.softmax(attn_scores, dim=1), each row sums to 1
    # (written out by hand: subtract the max so exp cannot overflow)
    row_max = scores.amax(dim=1, keepdim=True)
    row_max = torch.where(torch.isinf(row_max), torch.zeros_like(row_max), row_max)
    e = torch.exp(scores - row_max)
    s = e.sum(dim=1, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))


def softmax_with_temperature(scores, temperature, dim=-1):
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    scaled = scores / temperature
    top = scaled.amax(dim=dim, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    e = torch.exp(scaled - top)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))  # an all -inf slice: 0 / 1


def context_vectors(weights, values):
    return weights @ values
