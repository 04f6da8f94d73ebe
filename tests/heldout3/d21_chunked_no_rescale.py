import math
import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    Tq, Tk = queries.shape[-2], keys.shape[-2]
    scale = 1.0 / math.sqrt(queries.shape[-1])
    shape = queries.shape[:-1] + (1,)
    m = torch.full(shape, float("-inf"), dtype=queries.dtype, device=queries.device)
    l = torch.zeros(shape, dtype=queries.dtype, device=queries.device)
    acc = torch.zeros(queries.shape[:-1] + (values.shape[-1],), dtype=values.dtype, device=values.device)
    qi = torch.arange(Tq, device=queries.device).unsqueeze(-1)
    for start in range(0, Tk, chunk_size):
        k = keys[..., start:start + chunk_size, :]
        v = values[..., start:start + chunk_size, :]
        s = (queries @ k.transpose(-2, -1)) * scale
        if causal:
            kj = torch.arange(start, start + k.shape[-2], device=queries.device).unsqueeze(0)
            s = s.masked_fill(kj > qi + (Tk - Tq), float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe)
        alpha = torch.exp(m - m_safe)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc + p @ v          # running sum of weighted values
        m = m_new
    l = torch.where(l > 0, l, torch.ones_like(l))
    return acc / l


def attention_entropy(weights):
    logw = torch.log(weights.clamp_min(torch.finfo(weights.dtype).tiny))
    return -(weights * logw).sum(dim=-1)
