"""`python -I -m grader.child template CONTROL_FD GRADER_PID WARM KIT_ROOT...`: serve as the template."""

from __future__ import annotations

import sys

from .serve import serve_template

if __name__ == "__main__" and len(sys.argv) >= 3 and sys.argv[1] == "template":
    warm = sys.argv[4].split("+")  # "meta+figures", "meta", "figures" or "none"
    serve_template(
        int(sys.argv[2]), int(sys.argv[3]), sys.argv[5:], warm_meta="meta" in warm, warm_figures="figures" in warm
    )
