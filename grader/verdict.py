"""Verdicts: decide, in the trusted process, whether one case passed.

A case passes only if the learner's process sent back exactly a tensor of the
expected dtype and shape whose values match the gold answer within the
dtype's tolerance, with no NaN where none is expected.  The dtype and shape are
read from the tensor bytes received, never from what the child says about
them.  The reported device, the input-unchanged flag, the subclass flag and
the banned-call list are diagnostics: a hostile process can lie about them,
but it cannot make a wrong value pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass(frozen=True)
class CaseResult:
    """One case of one hook, run once on one device in one dtype, for one student."""

    student: str
    hook: str
    case: str
    device: str
    dtype: str
    status: str  # passed | failed | skipped
    message: str = ""
    seconds: float = 0.0
    mistake: str = ""  # the id of a catalogued mistake whose output matched, if any

    @property
    def test_name(self) -> str:
        return f"{self.hook}[{self.case}-{self.device}-{self.dtype}]"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
