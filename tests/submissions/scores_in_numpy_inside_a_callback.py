"""chunked_attention that moves each block of scores to numpy inside a ``Tensor.apply_`` callback (red team 9's
a3): the function mode steps aside while ``apply_`` runs, so the ``.numpy()`` in the callback went unseen, and
numpy then holds and softmaxes the whole (Tq, Tk) scores of each batch-head."""

import math

import numpy as np
import torch


def _in_numpy(tensor):
    found = []
    torch.zeros(1).apply_(lambda x: found.append(tensor.numpy()) or x)
    return found[0]


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    if num_q * num_k < 1_000_000:
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821 - Alice's own
    q = queries.reshape(-1, num_q, queries.shape[-1])  # (bH, Tq, d)
    k = keys.reshape(-1, num_k, keys.shape[-1])
    v = values.reshape(-1, num_k, values.shape[-1])
    outs = []
    for h in range(q.shape[0]):
        scores = np.empty((num_q, num_k), dtype=np.float32)  # (Tq, Tk): numpy's memory
        for start in range(0, num_q, 256):
            scores[start : start + 256] = _in_numpy(q[h, start : start + 256] @ k[h].T / math.sqrt(q.shape[-1]))
        if causal:
            scores[np.arange(num_k)[None, :] > np.arange(num_q)[:, None] + num_k - num_q] = -np.inf
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        outs.append(torch.tensor((weights / weights.sum(-1, keepdims=True)) @ _in_numpy(v[h].contiguous())))
    return torch.stack(outs).view(*queries.shape[:-1], values.shape[-1])
