"""The hidden suite's version: a hash of the code that decides a verdict, so a change means a regrade.

It sits above everything it names (the contract, the runtime, the reference, the cases, the suite,
the verdict and the diagnosis), so none of them needs to import it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import types

from grader import hook_table, hookspecs, registry, rules
from grader.child import call, figures, load, modules, spawns
from grader.instructor import (
    case_properties,
    cases,
    diagnosis,
    fingerprints,
    held_memory,
    module_trial_model,
    observations,
    replies,
    structure_diagnosis,
    submission_grading,
    suite,
    text_rules,
    verdict,
)
from grader.packs import groups, instructor_part


def verdict_modules() -> list[types.ModuleType]:
    """The modules whose code decides a verdict, or the diagnosis stored with it, in a fixed order: the contract,
    what runs in the learner's process, the gold answers, the cases, the verdict and its rules, the reply checks, the
    grading loop, the known mistakes, and every exercise group's own.  Not the sandbox (how learners' code is
    contained never changes a value), nor the rubric or the reports (points and files are recomputed from results).
    """
    from solutions import mistakes, reference

    kit = [
        hookspecs, hook_table, registry, load, call, spawns, figures, modules, reference, cases, case_properties,
        suite, verdict, held_memory, rules, replies, submission_grading, diagnosis, observations, fingerprints,
        module_trial_model, text_rules, structure_diagnosis, mistakes,
    ]  # fmt: skip
    declared = [  # every exercise group's declaration and its instructor's half (grader.packs)
        module for group in groups() for module in (group.module, group.hookspecs)
    ] + [module for part in ("HIDDEN_CASES", "REFERENCE", "MISTAKES") for module in instructor_part(part)]
    return list(dict.fromkeys(kit + declared))


def suite_version() -> str:
    """12 hex digits of a hash over the source of :func:`verdict_modules`: a change means a regrade.

    The source is read from the module objects actually imported
    (:func:`inspect.getsource`), not from paths next to this file.  The English of every message grading says by
    id (:data:`~grader.instructor.messages.MESSAGES`) counts too, as the wording in the verdict's modules does: a
    result keeps its message's English; the other languages are rendered when a report is written.  A hidden case's
    description counts by its English in its group's hidden cases (``HIDDEN_CASES``: for the chapter's,
    :mod:`~grader.instructor.groups.chapter`), so words for a case in another language
    (:mod:`~grader.instructor.case_words`), even where a case had none, are no new suite.
    """
    from grader.instructor.case_words import case_messages
    from grader.instructor.messages import MESSAGES

    digest = hashlib.sha256()
    for module in verdict_modules():
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError) as exc:
            raise RuntimeError(f"cannot read the source of {module.__name__} for the suite version: {exc}") from exc
        digest.update(module.__name__.encode() + b"\0" + source.encode("utf-8") + b"\0")
    described = case_messages()  # a case's English is the case's own, in its HIDDEN_CASES (hashed above)
    english = json.dumps(
        sorted(
            (key, words["en"])
            for key, words in MESSAGES.items()
            if key not in described and not (key.startswith("case.") and key.endswith("]"))  # a group's case's
        ),
        ensure_ascii=False,
    )
    digest.update(b"messages\0" + english.encode("utf-8") + b"\0")
    return digest.hexdigest()[:12]
