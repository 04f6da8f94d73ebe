import torch


def softmax_weights(scores, dim=-1):
    # softmax(x)_i = exp(x_i) / sum_j exp(x_j)
    exp_scores = torch.exp(scores)
    return exp_scores / exp_scores.sum(dim=dim, keepdim=True)


def softmax_with_temperature(scores, temperature, dim=-1):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    m = scores.amax(dim=dim, keepdim=True)
    m = torch.nan_to_num(m, neginf=0.0)
    e = torch.exp(scores - m)
    w = e / e.sum(dim=dim, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
    # 温度: 把权重除以温度
    return w / temperature
