"""Learner code the kit's tests build: the reference as a learner would paste it, Alice with a snippet.

The one library for it: every test that builds a submission from Alice's solution and a snippet
(``tests/submissions/`` for single mistakes and attacks, ``tests/hostile/submissions/`` for the
hostile end-to-end class) goes through :func:`alice_with`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from grader.registry import HOOK_NAMES

KIT = Path(__file__).resolve().parent.parent
ALICE = KIT / "examples" / "submissions" / "alice.py"
SNIPPETS = Path(__file__).resolve().parent / "submissions"
HOSTILE_SNIPPETS = Path(__file__).resolve().parent / "hostile" / "submissions"


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


def group_reference_source(module: str, hooks: Iterable[str]) -> str:
    """A group's own reference (``solutions.patterns``) as a learner would paste it: its imports but the kit's, and
    its hooks with every function and class they use, nothing else (its catalogue of mistakes stays out)."""
    text = (KIT / (module.replace(".", "/") + ".py")).read_text()
    tree = ast.parse(text)
    defined = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    wanted: set[str] = set()
    todo = list(hooks)
    while todo:  # the hooks, then every name of this module they use, and so on
        name = todo.pop()
        if name in defined and name not in wanted:
            wanted.add(name)
            todo += [n.id for n in ast.walk(defined[name]) if isinstance(n, ast.Name)]
    ours = ("grader", "solutions", "__future__")
    keep = [
        n
        for n in tree.body
        if (isinstance(n, ast.Import) and not any(a.name.split(".")[0] in ours for a in n.names))
        or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] not in ours)
        or getattr(n, "name", None) in wanted
    ]
    pasted = "\n\n\n".join(ast.get_source_segment(text, n) or "" for n in keep)
    return "\n".join(ln for ln in pasted.splitlines() if ln.strip() != "@hookimpl") + "\n"


def answers_of(group: str) -> str:
    """What a learner who finished exercise group ``group`` pasted below its stubs: the chapter's reference (all of
    it, as ever), or the group's own reference's hooks (:func:`group_reference_source`)."""
    from grader.packs import groups

    owner = next(g for g in groups() if any(r.group == group for r in g.rows))
    module = owner.part("REFERENCE")
    if module == "solutions.reference":
        return reference_source()
    return group_reference_source(str(module), [r.hook for r in owner.rows if r.group == group])


def other_groups_answers() -> str:
    """What a learner pastes for every exercise group Alice did not write (she wrote the chapter's and the patterns
    group's): each such group's own reference's hooks (:func:`answers_of`); empty when she wrote them all."""
    from grader.hook_table import GROUPS, hooks_in

    alice = {n.name for n in ast.parse(ALICE.read_text(encoding="utf-8")).body if isinstance(n, ast.FunctionDef)}
    others = [g for g in GROUPS if answers_of(g) != reference_source() and not set(hooks_in(g)) <= alice]
    return "".join(f"\n\n# --- the {g} group ---\n{answers_of(g)}" for g in others)


def alice_with(snippet: str | None, folder: Path = SNIPPETS, fills: Mapping[str, str] | None = None) -> str:
    """Alice's solution with the hooks ``folder/<snippet>.py`` defines replaced by the snippet's.

    ``fills`` replaces placeholders in the snippet first (``__HOSTILE_TOKEN__`` -> a value).
    Alice's own versions of the replaced hooks stay, renamed ``_alice_<hook>``, so
    her modules keep calling them.  ``None``: Alice's solution as she wrote it.
    """
    source = ALICE.read_text(encoding="utf-8")
    if snippet is None:
        return source
    path = folder / f"{snippet}.py"
    extra = path.read_text(encoding="utf-8")
    for key, value in (fills or {}).items():
        extra = extra.replace(key, value)
    replaced = {
        node.name for node in ast.parse(extra).body if isinstance(node, ast.FunctionDef) and node.name in HOOK_NAMES
    }
    for hook in replaced:  # Alice's modules keep calling her own version under its new name
        source = re.sub(rf"\b{hook}\b", f"_alice_{hook}", source)
    return source + f"\n\n# --- {path.relative_to(KIT).as_posix()} ---\n{extra}"


def graded_snippet(folder: Path, snippet: str, suite, template, limits=None, snippets: Path = SNIPPETS) -> list:
    """Alice with ``snippet`` (:func:`alice_with`, from ``snippets``) written to ``folder/learner.py`` and graded
    in ``template``: the results (``grade_submission``), under ``limits`` (the grader's own by default)."""
    from grader.instructor.handin_reading import read_submission
    from grader.instructor.sandbox import Limits
    from grader.instructor.submission_grading import grade_submission

    path = folder / "learner.py"
    path.write_text(alice_with(snippet, snippets), encoding="utf-8")
    submission = read_submission(path)
    assert submission.error is None, submission.error
    return grade_submission(submission, suite, template, limits or Limits()).results
