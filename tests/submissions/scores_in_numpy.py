"""chunked_attention computing long sequences' scores in numpy, one batch-head at a time: no torch mode sees them."""

import math

import numpy as np
import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if queries.device.type != "cpu" or keys.shape[-2] < 512:
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821 - Alice's own
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    q = queries.reshape(-1, num_q, queries.shape[-1]).double()
    k = keys.reshape(-1, num_k, keys.shape[-1]).double()
    v = values.reshape(-1, num_k, values.shape[-1]).double()
    future = np.triu(np.ones((num_q, num_k), dtype=bool), 1 + num_k - num_q)
    out = []
    for i in range(q.shape[0]):
        scores = q[i].numpy() @ np.asarray(k[i]).T / math.sqrt(q.shape[-1])  # a whole (Tq, Tk), out of torch's sight
        if causal:
            scores[future] = -np.inf
        weights = np.exp(scores - np.nan_to_num(scores.max(axis=-1, keepdims=True), neginf=0.0))
        weights /= np.maximum(weights.sum(axis=-1, keepdims=True), np.finfo(np.float64).tiny)
        out.append(torch.from_numpy(weights @ v[i].numpy()))
    return torch.stack(out).reshape(*queries.shape[:-1], values.shape[-1]).to(queries.dtype)
