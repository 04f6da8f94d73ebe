"""Round 5's f1: the switches that step out of the recording modes, reached by a string through
``string.Formatter().get_field`` (no attribute name in the text), around the banned ``torch.softmax``.
The kernel it runs is heard whatever the modes: it gains nothing over ``banned_softmax``.
"""

import string

import torch


def softmax_weights(scores, dim=-1):
    get = string.Formatter().get_field
    functions_off = get("0._C.DisableTorchFunction", (torch,), {})[0]
    modes_off = get("0.utils._python_dispatch._disable_current_modes", (torch,), {})[0]
    with functions_off(), modes_off():
        return torch.softmax(scores, dim=dim)
