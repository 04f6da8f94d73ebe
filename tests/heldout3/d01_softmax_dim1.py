import torch


def dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1)


def softmax_weights(scores, dim=-1):
    # normalise each row so it sums to one (like torch.softmax(attn_scores, dim=1) in the book)
    row_max = scores.max(dim=1, keepdim=True).values
    row_max = torch.nan_to_num(row_max, neginf=0.0)
    e = torch.exp(scores - row_max)
    total = e.sum(dim=1, keepdim=True)
    total = torch.where(total > 0, total, torch.ones_like(total))
    return e / total


def context_vectors(weights, values):
    return weights @ values
