"""Attention dropout: randomly drop attention weights while training.

Dropping a random share p of the weights keeps the model from leaning on a few
fixed token pairs.  It only happens in training; at eval every weight is used.

Run `pytest exercises/test_dropout.py` to check your work.
"""

import torch  # noqa: F401  (you will need it)


def dropout_scale(weights, keep_mask, p):
    """Inverted-dropout scaling: weights * keep_mask / (1 - p).

    Each entry survives with probability 1 - p, so its expected value after
    dropping is (1 - p) * w.  Dividing the survivors by (1 - p) brings the
    expectation back to w, so training and eval see weights of the same scale
    (dividing by p instead only works by luck at p = 0.5).  p == 1 drops
    everything: return zeros, not 0 * inf = NaN.  p outside [0, 1] is a ValueError.
    """
    # weights: any shape   keep_mask: same shape, bool or 0/1   ->   same shape and dtype as weights
    raise NotImplementedError(
        "exercise dropout_scale: not implemented yet — dropped entries zero and the kept ones scaled so every "
        "entry keeps its expected value; p = 1 drops everything"
    )


def attention_dropout(weights, p, training=True, generator=None):
    """Inverted dropout of the attention weights, drawn by hand.

    Draw a uniform number per entry (torch.rand with `generator`, on the
    weights' device), keep the entry when it is >= p (probability 1 - p), and
    scale the survivors with dropout_scale's rule.  In eval (training=False) or
    with p == 0, return the weights' values unchanged.
    Not allowed: F.dropout, nn.Dropout, torch.dropout.
    """
    # weights: any shape, e.g. (b, H, T, T)   ->   same shape and dtype
    raise NotImplementedError(
        "exercise attention_dropout: not implemented yet — drop each weight with probability p, drawn from the "
        "given generator, and rescale the ones kept"
    )
