"""chunked_attention that computes the whole scores in numpy, over a bytearray wrapped by ``torch.frombuffer`` at
import, before any call is measured (red team 8's a1, its buffer made earlier): the call's only torch ops copy the
inputs in and the result out; numpy's memory is weighed by neither the meter nor torch's allocator."""

import math

import numpy as np
import torch

_HOST = bytearray(512 * 1024 * 4)  # room for q, k, v and the result of the long case, as float32
_WINDOW = torch.frombuffer(_HOST, dtype=torch.float32)


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if queries.shape[-2] * keys.shape[-2] < 1_000_000:
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821 - Alice's own
    sizes = [queries.numel(), keys.numel(), values.numel()]
    starts = [0, sizes[0], sizes[0] + sizes[1], sum(sizes)]
    for tensor, start in zip((queries, keys, values), starts):
        _WINDOW[start : start + tensor.numel()].copy_(tensor.reshape(-1))
    host = np.frombuffer(_HOST, dtype=np.float32)
    q, k, v = (host[a : a + n].reshape(t.shape) for a, n, t in zip(starts, sizes, (queries, keys, values)))
    scores = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (b, H, Tq, Tk)
    if causal:
        num_q, num_k = scores.shape[-2:]
        scores[..., np.arange(num_k)[None, :] > np.arange(num_q)[:, None] + num_k - num_q] = -np.inf
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    out = (weights / weights.sum(-1, keepdims=True)) @ v
    shape = (*queries.shape[:-1], values.shape[-1])
    host[starts[3] : starts[3] + out.size] = out.reshape(-1)
    return _WINDOW[starts[3] : starts[3] + out.size].reshape(shape).clone()
