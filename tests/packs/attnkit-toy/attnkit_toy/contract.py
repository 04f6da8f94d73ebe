"""The toy group's contract: how concentrated is each query's attention?"""

from grader.hook_row import HookRow
from grader.hookspecs import hookspec

POSITION = 50
ROWS = (HookRow("peak_weight", "toy", "tensor", points=2),)
HIDDEN_CASES = "attnkit_toy.cases"
REFERENCE = "attnkit_toy.solutions"
STUB = "attnkit_toy.stub"
PUBLIC_TESTS = "attnkit_toy.public_tests"


@hookspec(firstresult=True)
def peak_weight(weights):
    """Return the largest attention weight of each query: 1 when it looks at one key only, 1/Tk when uniform.

    :param weights: ``(..., Tq, Tk)`` row-normalised attention weights.
    :returns: ``(..., Tq)``, same dtype and device.
    """
