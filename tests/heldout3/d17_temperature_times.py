import torch


def softmax_weights(scores, dim=-1):
    mx = torch.amax(scores, dim=dim, keepdim=True).detach()
    mx = torch.where(mx == float("-inf"), torch.zeros_like(mx), mx)
    ex = (scores - mx).exp()
    s = ex.sum(dim=dim, keepdim=True)
    return ex / torch.where(s == 0, torch.ones_like(s), s)


def softmax_with_temperature(scores, temperature, dim=-1):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    # a higher temperature makes the distribution sharper
    return softmax_weights(scores * temperature, dim=dim)
