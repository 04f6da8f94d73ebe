"""Scores, weights, context vectors: the three steps of self-attention.

For every token (the query) attention asks: how much should each token in the
sequence (the keys) contribute to my new representation?  Three steps answer it:

1. scores:  how well does query i match key j?                  (a dot product)
2. weights: turn one row of scores into a distribution over j.  (a softmax,
            made sharper or flatter by a temperature)
3. context: mix the value vectors with those weights.           (a weighted sum)

Run `pytest exercises/test_scores.py` to check your work.
"""

import torch  # noqa: F401  (you will need it)


def dot_product_scores(queries, keys):
    """Every query dotted with every key: entry [i, j] = <q_i, k_j>.

    A dot product is large when two vectors point the same way, so it is the
    cheapest similarity there is.  The chapter's double loop over torch.dot is
    the definition; one matrix product computes all pairs at once.  Mind the
    leading (batch) dims: `keys.T` reverses *all* dims of a 3-D tensor, so
    transpose only the last two.
    """
    # queries: (..., Tq, d)   keys: (..., Tk, d)   ->   scores: (..., Tq, Tk)
    raise NotImplementedError(
        "exercise dot_product_scores: not implemented yet — queries times keys transposed on the last two dims"
    )


def scaled_dot_product_scores(queries, keys):
    """Dot-product scores divided by sqrt(d_k), d_k = keys.shape[-1].

    A dot product of two d_k-dim vectors with unit-variance entries has variance
    d_k, so with wide heads the scores grow and the softmax saturates: one weight
    near 1, the rest near 0, and gradients that all but vanish.  Dividing by
    sqrt(d_k) brings the variance back to 1.  Scale once, by the key dimension
    (not d_in, not T).
    """
    # queries: (..., Tq, d_k)   keys: (..., Tk, d_k)   ->   (..., Tq, Tk)
    raise NotImplementedError(
        "exercise scaled_dot_product_scores: not implemented yet — the dot-product scores, scaled so their spread "
        "does not grow with the key dimension"
    )


def softmax_weights(scores, dim=-1):
    """Softmax along `dim`: positive weights that sum to 1, written by hand.

    exp(x) overflows for x around 90 in float32, but softmax(x) == softmax(x - c)
    for any constant c, so subtract each slice's maximum first: the largest
    exponent is then exp(0) = 1.  exp(-inf) = 0, so masked (-inf) entries get
    exactly zero weight.  A slice that is entirely -inf has maximum -inf and
    -inf - (-inf) is NaN: give that slice all zeros instead.
    Not allowed: torch.softmax, F.softmax, Tensor.softmax, log_softmax.
    """
    # scores: any shape, e.g. (b, T, T) or (b, H, T, T); normalise along `dim`
    raise NotImplementedError(
        "exercise softmax_weights: not implemented yet — weights along dim that are positive and sum to 1, safe "
        "for large scores; a row where every score is -inf gives zeros"
    )


def softmax_with_temperature(scores, temperature, dim=-1):
    """Softmax of scores / temperature along `dim`: one knob for how peaked the weights are.

    A temperature below 1 stretches the scores apart, so the largest one takes
    more of the weight (towards one-hot as it nears 0); above 1 it squeezes them
    together (towards uniform).  The chapter tunes it at inference time, to set how
    concentrated the attention is.  The tiny
    temperatures are where the max trick of softmax_weights earns its keep:
    scores / 1e-4 reach 1e4, and exp(1e4) is inf in every dtype.  A temperature
    of 0 or below has no meaning: raise ValueError, not an assert.
    Not allowed: torch.softmax, F.softmax, Tensor.softmax, log_softmax.
    """
    # scores: any shape, e.g. (b, T, T); temperature: a number > 0; normalise along `dim`
    raise NotImplementedError(
        "exercise softmax_with_temperature: not implemented yet — weights whose sharpness the temperature sets, "
        "safe for tiny temperatures; a temperature that is not positive is a ValueError"
    )


def context_vectors(weights, values):
    """Each query's context vector: the values mixed by that query's weights.

    Row i of the result is sum_j weights[i, j] * values[j], a weighted average of
    the value vectors, which is one matrix product for all rows at once.
    """
    # weights: (..., Tq, Tk)   values: (..., Tk, dv)   ->   (..., Tq, dv)
    raise NotImplementedError("exercise context_vectors: not implemented yet — weights times values")
