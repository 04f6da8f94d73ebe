"""Learner code the kit's tests build: the reference as a learner would paste it, Alice with a snippet."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from grader.registry import HOOK_NAMES

KIT = Path(__file__).resolve().parent.parent
ALICE = KIT / "examples" / "submissions" / "alice.py"
SNIPPETS = Path(__file__).resolve().parent / "submissions"


def reference_source(only: tuple[str, ...] = ()) -> str:
    """The reference's code as a learner would paste it: no decorator, no grader import.

    With ``only``, just the imports and those functions.
    """
    text = (KIT / "solutions" / "reference.py").read_text()
    if only:
        tree = ast.parse(text)
        keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) or getattr(n, "name", "") in only]
        text = "\n\n".join(ast.get_source_segment(text, n) or "" for n in keep)
    drop = ("@hookimpl", "from grader import hookimpl", "from __future__ import annotations")
    return "\n".join(ln for ln in text.splitlines() if ln.strip() not in drop) + "\n"


def alice_with(snippet: str | None) -> str:
    """Alice's solution with the hooks ``tests/submissions/<snippet>.py`` defines replaced by the snippet's."""
    source = ALICE.read_text(encoding="utf-8")
    if snippet is not None:
        extra = (SNIPPETS / f"{snippet}.py").read_text(encoding="utf-8")
        replaced = {
            node.name for node in ast.parse(extra).body if isinstance(node, ast.FunctionDef) and node.name in HOOK_NAMES
        }
        for hook in replaced:  # Alice's modules keep calling her own version under its new name
            source = re.sub(rf"\b{hook}\b", f"_alice_{hook}", source)
        source += f"\n\n# --- from tests/submissions/{snippet}.py ---\n{extra}"
    return source
