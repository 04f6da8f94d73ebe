import math

import torch


def dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1)


def scaled_dot_product_scores(queries, keys):
    return dot_product_scores(queries, keys) / math.sqrt(keys.shape[-1])


def softmax_weights(scores, dim=-1):
    # 先减去最大值（数值稳定）
    mx = scores.amax(dim=dim, keepdim=True)
    mx = torch.nan_to_num(mx, neginf=0.0)  # 整行都是 -inf 的时候
    e = torch.exp(scores - mx)
    total = e.sum(dim=dim, keepdim=True)
    return e / total.clamp(min=1e-30)


def context_vectors(weights, values):
    return weights @ values
