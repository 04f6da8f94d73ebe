"""Heads: cut the feature dimension into H independent attention heads and glue them back.

Multi-head attention runs H small attentions side by side, each on its own
d/H columns of the projected queries, keys and values, so each head can learn
its own notion of "relevant".  Putting the heads in their own dimension lets one
batched matrix product serve all of them.

Run `pytest exercises/test_heads.py` to check your work.
"""

import torch  # noqa: F401  (you will need it)


def split_heads(x, num_heads):
    """(b, T, d) -> (b, H, T, d/H): head h holds columns [h*d/H, (h+1)*d/H).

    Each token's row of d features is cut into H chunks of hd = d/H, the token
    kept intact; the heads then go in front of the tokens, so that scores are
    computed per head over (T, T).  Reading the same memory straight into
    (b, H, T, hd) would not do that: head 0 would get the first T*hd numbers,
    whole rows of the first tokens, mixing tokens into heads.  The input may be
    non-contiguous.  d % H != 0 is a ValueError.
    """
    # x: (b, T, d)  ->  (b, T, H, hd)  ->  (b, H, T, hd)
    raise NotImplementedError(
        "exercise split_heads: not implemented yet — (b, T, d) to (b, H, T, d // H): each head gets its own slice "
        "of the features"
    )


def merge_heads(x):
    """(b, H, T, hd) -> (b, T, H*hd): the inverse of split_heads.

    Undo split_heads' steps in reverse order: the tokens back in front of the
    heads, then each token's H chunks side by side again.  The input may be
    non-contiguous, and so is the memory after moving dims around; the contract
    asks for a contiguous result whatever the layout of the input.
    """
    # x: (b, H, T, hd)  ->  (b, T, H, hd)  ->  (b, T, H*hd)
    raise NotImplementedError(
        "exercise merge_heads: not implemented yet — the inverse of split_heads, (b, H, T, hd) to (b, T, H * hd), "
        "as a contiguous tensor"
    )
