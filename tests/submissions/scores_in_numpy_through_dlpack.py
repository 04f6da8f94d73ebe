"""chunked_attention that hands its inputs to numpy as DLPack capsules (``torch.utils.dlpack.to_dlpack``: a torch
function no mode sees, and no tensor method; red team 10's a1), then computes the whole scores in numpy."""

import math

import numpy as np
import torch
from torch.utils.dlpack import to_dlpack


class _Held:
    """What numpy asks of a DLPack producer, around a capsule torch made."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # the CPU


def _in_numpy(tensor):
    return np.array(np.from_dlpack(_Held(to_dlpack(tensor.contiguous()))))


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if queries.shape[-2] * keys.shape[-2] < 1_000_000:
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821 - Alice's own
    q, k, v = _in_numpy(queries), _in_numpy(keys), _in_numpy(values)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (b, H, Tq, Tk)
    if causal:
        num_q, num_k = scores.shape[-2:]
        scores[..., np.arange(num_k)[None, :] > np.arange(num_q)[:, None] + num_k - num_q] = -np.inf
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return torch.tensor((weights / weights.sum(-1, keepdims=True)) @ v)
