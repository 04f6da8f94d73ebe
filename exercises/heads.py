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

    Why view, then transpose?  view(b, T, H, hd) cuts each token's row into H
    chunks and keeps the token intact; transpose(1, 2) then moves the heads in
    front of the tokens, so scores are computed per head over (T, T).  A bare
    view(b, H, T, hd) reads the same memory in a different order: head 0 would
    get the first T*hd numbers, i.e. whole rows of the first tokens, mixing
    tokens into heads.  view needs contiguous memory: for a non-contiguous
    input use reshape (or .contiguous() first).  d % H != 0 is a ValueError.
    """
    # x: (b, T, d)  ->  (b, T, H, hd)  ->  (b, H, T, hd)
    raise NotImplementedError(
        "exercise split_heads: not implemented yet — (b, T, d) to (b, H, T, d // H): each head gets its own slice "
        "of the features"
    )


def merge_heads(x):
    """(b, H, T, hd) -> (b, T, H*hd): the inverse of split_heads.

    Undo the steps in reverse order: transpose(1, 2) back to (b, T, H, hd), then
    flatten the last two dims.  The transpose leaves the memory non-contiguous,
    and view needs contiguous memory; the contract asks for a contiguous result,
    whatever the layout of the input (reshape alone may hand back a view).
    """
    # x: (b, H, T, hd)  ->  (b, T, H, hd)  ->  (b, T, H*hd)
    raise NotImplementedError(
        "exercise merge_heads: not implemented yet — the inverse of split_heads, (b, H, T, hd) to (b, T, H * hd), "
        "as a contiguous tensor"
    )
