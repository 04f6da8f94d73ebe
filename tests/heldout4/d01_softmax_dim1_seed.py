# 按照教程: attn_weights = torch.softmax(attn_scores, dim=1)，这里手写 softmax
import torch


def dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1)


def softmax_weights(scores, dim=-1):
    # 每行的和为 1（教程里用 dim=1）
    mx = scores.max(dim=1, keepdim=True).values
    mx = torch.nan_to_num(mx, neginf=0.0)
    e = torch.exp(scores - mx)
    s = e.sum(dim=1, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


def context_vectors(weights, values):
    return weights @ values
