"""Toy: how concentrated is each query's attention?

The largest weight of a row says it: 1 when the query looks at one key only, 1/Tk when it spreads evenly.

Run `pytest exercises/test_toy.py` to check your work.
"""

import torch  # noqa: F401  (you will need it)


def peak_weight(weights):
    """The largest attention weight of each query: (..., Tq, Tk) -> (..., Tq)."""
    raise NotImplementedError("exercise peak_weight: not implemented yet — the max over each query's keys")
