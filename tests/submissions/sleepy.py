"""Right answers, but the first call of three hooks sleeps half a second (a slow learner)."""

import time

_slept = set()


def _nap(hook):
    if hook not in _slept:
        _slept.add(hook)
        time.sleep(0.5)


def context_vectors(weights, values):
    _nap("context_vectors")
    return weights @ values


def renormalize_masked_weights(weights):
    _nap("renormalize_masked_weights")
    kept = weights.tril()
    return kept / kept.sum(dim=-1, keepdim=True)


def merge_heads(x):
    _nap("merge_heads")
    batch, heads, tokens, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, tokens, heads * head_dim).contiguous()
