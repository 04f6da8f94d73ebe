import torch


def dot_product_scores(queries, keys):
    return torch.matmul(queries, keys.transpose(-1, -2))


def scaled_dot_product_scores(queries, keys):
    # d_k = keys.shape[1], as in the seed: k.shape[1]
    scores = torch.matmul(queries, keys.transpose(-1, -2))
    return scores / keys.shape[1] ** 0.5


def context_vectors(weights, values):
    return torch.matmul(weights, values)
