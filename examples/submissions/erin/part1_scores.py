# Erin -- part 1: attention scores and weights
import torch


def dot_product_scores(queries, keys):
    return queries @ keys.mT  # .mT swaps the last two dims, so batches work


def scaled_dot_product_scores(queries, keys):
    d_k = keys.shape[-1]
    return dot_product_scores(queries, keys) / d_k**0.5


def softmax_weights(scores, dim=-1):
    shift = scores.amax(dim=dim, keepdim=True).nan_to_num(neginf=0.0)
    e = (scores - shift).exp()
    denom = e.sum(dim=dim, keepdim=True)
    denom = torch.where(denom == 0, torch.ones_like(denom), denom)  # all-masked slice -> zeros
    return e / denom


def softmax_with_temperature(scores, temperature, dim=-1):
    # a temperature of 0 or below has no meaning: refuse it before dividing
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return softmax_weights(scores / temperature, dim=dim)


def context_vectors(weights, values):
    return weights @ values
