"""Long sequences: local attention, and attention computed in blocks.

Full attention builds a (T, T) score matrix per head, so its memory grows with
T squared: at T = 1024 with 8 heads that is eight million scores, at T = 32k
it no longer fits.  Two ways out:

1. look less:  each token attends only to a window of recent tokens.   (a sliding-window mask)
2. hold less:  walk the keys block by block and never hold all scores.  (chunked attention)

The second gives exactly the same answer as full attention, thanks to the
online softmax: keep, per query, a running max and a running sum, and rescale
what you have summed so far whenever the max grows.

Run `pytest exercises/test_long_sequences.py` to check your work.
"""

import math  # noqa: F401  (you will need it)

import torch  # noqa: F401  (you will need it)


def sliding_window_mask(num_tokens, window, device=None):
    """A (T, T) bool mask, True where query i may not look: the future, and keys too far back.

    Local attention lets token i see itself and the window - 1 tokens before
    it, so the cost per token stops growing with T.  It is still causal: the
    future stays hidden, as in causal_mask.  With window >= T nothing is too
    far back and you get causal_mask(T) again; window == 1 sees only itself.
    Mind the off-by-one: count the keys one row may see, itself included.
    window < 1 or num_tokens < 1 is a ValueError.
    """
    # -> (T, T) torch.bool on `device`; mask[i, j] is True when j > i or j <= i - window
    raise NotImplementedError(
        "exercise sliding_window_mask: not implemented yet — the causal mask, or'ed with the keys window or more back"
    )


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    """softmax(q k^T / sqrt(d)) v, computed over blocks of chunk_size keys: never all the scores at once.

    The softmax needs the max and the sum of a whole row, but you only see one
    block of it at a time.  Keep per query a running max m, a running sum l of
    exp(score - m) and a running mix acc of the values weighted by exp(score - m).
    When a block raises the max to m_new, everything summed so far was relative
    to the old m: multiply l and acc by exp(m - m_new) before adding the block.
    Start m at -inf (an empty max), not 0.  At the end, acc / l is the answer.

    The last block may be shorter (chunk_size need not divide Tk).  With
    causal=True, query i is at position i + (Tk - Tq) among the keys and sees
    keys up to there: compare positions in the whole sequence, not inside a
    block.  A query that sees no key gives zeros, never NaN.  The grader
    measures the memory your tensors hold at once: never as much as one
    (Tq, Tk) matrix of scores, even split up; and compute with torch only.

    Not allowed: F.scaled_dot_product_attention, nn.MultiheadAttention.
    """
    # queries: (..., Tq, d)   keys: (..., Tk, d)   values: (..., Tk, dv)   ->   (..., Tq, dv)
    # m = full((..., Tq, 1), -inf); l = zeros((..., Tq, 1)); acc = zeros((..., Tq, dv))
    # for start in range(0, Tk, chunk_size):
    #     scores = q @ k_block^T / sqrt(d)                          # (..., Tq, c)
    #     (causal: -inf where the key's position is after the query's)
    #     m_new = max(m, scores.amax(-1)); rescale = exp(m - m_new)  # (..., Tq, 1)
    #     p = exp(scores - m_new)                                  # (..., Tq, c)
    #     l = l * rescale + p.sum(-1); acc = acc * rescale + p @ v_block   # (..., Tq, dv)
    raise NotImplementedError(
        "exercise chunked_attention: not implemented yet — an online softmax over key blocks (running max and sum)"
    )
