import math

import torch


def scaled_dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1) / math.sqrt(keys.shape[-1])


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    *lead, Tq, d = queries.shape
    Tk = keys.shape[-2]
    dv = values.shape[-1]
    run_max = queries.new_full((*lead, Tq, 1), -math.inf)
    run_sum = queries.new_zeros((*lead, Tq, 1))
    run_out = queries.new_zeros((*lead, Tq, dv))
    rows = torch.arange(Tq, device=queries.device).unsqueeze(1) + (Tk - Tq)
    for s in range(0, Tk, chunk_size):
        e = min(s + chunk_size, Tk)
        blk = scaled_dot_product_scores(queries, keys[..., s:e, :])
        if causal:
            cols = torch.arange(s, e, device=queries.device).unsqueeze(0)
            blk = blk.masked_fill(cols > rows, -math.inf)
        run_max = torch.maximum(run_max, blk.amax(-1, keepdim=True))
        shift = torch.nan_to_num(run_max, neginf=0.0)
        p = torch.exp(blk - shift)
        run_sum = run_sum + p.sum(-1, keepdim=True)
        run_out = run_out + p @ values[..., s:e, :]
    return run_out / torch.where(run_sum == 0, torch.ones_like(run_sum), run_sum)
