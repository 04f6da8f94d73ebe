"""Zeng -- scores and softmax (section 3.3)"""
import torch


def dot_product_scores(queries, keys):
    return queries @ keys.T


def scaled_dot_product_scores(queries, keys):
    return dot_product_scores(queries, keys) / keys.shape[-1] ** 0.5


def softmax_weights(scores, dim=-1):
    # softmax_naive from the book
    return torch.exp(scores) / torch.exp(scores).sum(dim=dim, keepdim=True)


def context_vectors(weights, values):
    return weights @ values


if __name__ == "__main__":
    inputs = torch.tensor(
        [[0.43, 0.15, 0.89],  # Your     (x^1)
         [0.55, 0.87, 0.66],  # journey  (x^2)
         [0.57, 0.85, 0.64],  # starts   (x^3)
         [0.22, 0.58, 0.33],  # with     (x^4)
         [0.77, 0.25, 0.10],  # one      (x^5)
         [0.05, 0.80, 0.55]]  # step     (x^6)
    )
    attn_scores = dot_product_scores(inputs, inputs)
    attn_weights = softmax_weights(attn_scores)
    print("Attention weights:", attn_weights)
    print("Sum:", attn_weights.sum(dim=-1))
    all_context_vecs = context_vectors(attn_weights, inputs)
    print(all_context_vecs)
