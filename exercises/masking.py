"""The causal mask: a token may look at itself and the past, never the future.

A language model predicts token t+1 from tokens 0..t; if attention let token t
read token t+1, training would teach it to copy the answer.  So every score
above the diagonal (key j later than query i) must get zero weight.

Run `pytest exercises/test_masking.py` to check your work.
"""

import torch  # noqa: F401  (you will need it)


def causal_mask(num_tokens, device=None):
    """A (T, T) bool mask, True strictly above the diagonal: the future to hide.

    Row i is query i: it may see keys 0 .. i, itself included.  A mask that
    hid the diagonal too would leave token i unable to attend to itself, and
    row 0 with nothing left at all.  Build it on `device`, so it lands next to
    the scores it masks.  num_tokens < 1 is a ValueError.
    """
    # -> (T, T) torch.bool; mask[i, j] is True when j > i
    raise NotImplementedError(
        "exercise causal_mask: not implemented yet — a bool (T, T) mask, True where a query would see a key that "
        "comes after it"
    )


def apply_causal_mask(scores):
    """A copy of `scores` with every future entry set to -inf.

    Why -inf and not 0?  The mask goes on *before* the softmax, and
    exp(0) = 1 still gives the future a share of the weight; exp(-inf) = 0
    gives it none, and the softmax then normalises over the past alone.
    Take T from the scores (no fixed size like 6) and build the mask on the
    scores' device.  Leave the input alone: a new tensor, nothing written in place.
    """
    # scores: (..., T, T)   ->   (..., T, T), -inf above the diagonal
    raise NotImplementedError(
        "exercise apply_causal_mask: not implemented yet — the scores with every key after its query hidden, so "
        "softmax gives it no weight"
    )


def renormalize_masked_weights(weights):
    """The chapter's first approach: zero the future weights, then renormalise each row.

    After a softmax every row sums to 1; zeroing the future leaves rows that sum
    to less, so divide each row by its new sum.  This gives exactly the softmax
    of the masked scores (the -inf trick does it in one step): the softmax's
    normaliser simply cancels.
    """
    # weights: (..., T, T), rows sum to 1   ->   (..., T, T), 0 above the diagonal, rows sum to 1
    raise NotImplementedError(
        "exercise renormalize_masked_weights: not implemented yet — the weights with the future zeroed and each "
        "row summing to 1 again"
    )
