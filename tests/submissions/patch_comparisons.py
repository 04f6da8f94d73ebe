"""Patches torch's comparison functions at import, then returns unnormalised softmax weights.

If the verdict were computed in the learner's process, every comparison would say "equal".
"""

import torch
import torch.testing


def _always_true(*args, **kwargs):
    return True


def _never_complain(*args, **kwargs):
    return None


torch.allclose = _always_true
torch.equal = _always_true
torch.isclose = _always_true
torch.Tensor.allclose = _always_true
torch.Tensor.equal = _always_true
torch.testing.assert_close = _never_complain


def softmax_weights(scores, dim=-1):
    return torch.exp(scores)  # never divided by the sum
