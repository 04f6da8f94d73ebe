"""`python -I -m grader.child template CONTROL_FD GRADER_PID WARM BANNED KIT_ROOT...`: serve as the template."""

from __future__ import annotations

import os
import sys

from .serve import serve_template

if __name__ == "__main__" and len(sys.argv) >= 3 and sys.argv[1] == "template":
    warm = sys.argv[4].split("+")  # "meta+figures", "meta", "figures" or "none"
    banned = [name for name in sys.argv[5].split("+") if name]  # "softmax+dropout+…": the names calls may ban
    serve_template(
        int(sys.argv[2]), int(sys.argv[3]), sys.argv[6:], warm_meta="meta" in warm, warm_figures="figures" in warm,
        banned=banned,
    )
    sys.stderr.flush()
    os._exit(0)  # the sweep is done: no interpreter teardown (torch's takes most of a second of the grader's exit)
