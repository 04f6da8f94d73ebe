"""Returns the right softmax values, but as a numpy array instead of a tensor."""

import torch


def _right_values(scores, dim):
    shifted = scores - scores.amax(dim=dim, keepdim=True).nan_to_num(neginf=0.0)
    exps = shifted.exp()
    return exps / exps.sum(dim=dim, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)


def softmax_weights(scores, dim=-1):
    values = _right_values(scores, dim)
    # numpy has no bfloat16: widen those (to float32) rather than raise, so every case gets an ndarray
    return (values.float() if values.dtype == torch.bfloat16 else values).numpy()
