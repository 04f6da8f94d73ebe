"""``torch.softmax`` compiled by ``torch.compile``: traced once, then run as code of inductor's own (red team 7's
untested route)."""

import torch

_compiled = torch.compile(lambda s, d: torch.softmax(s, dim=d), dynamic=True)


def softmax_weights(scores, dim=-1):
    return _compiled(scores, dim)
