import torch


def softmax_with_temperature(scores, temperature, dim=-1):
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    z = scores * temperature  # temperature sharpens / flattens the distribution
    m = z.amax(dim=dim, keepdim=True)
    m = torch.nan_to_num(m, neginf=0.0)
    e = torch.exp(z - m)
    total = e.sum(dim=dim, keepdim=True)
    return e / total.clamp_min(torch.finfo(e.dtype).tiny)
