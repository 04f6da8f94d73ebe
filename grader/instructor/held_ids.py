"""A resumed run's ids: a hand-in never takes an id the out folder's gradebook holds for another hand-in.

:func:`~grader.instructor.identify.identify` settles ids among the hand-ins of one run.  Graded into an existing
``--out``, a run's hand-in is also weighed against the hand-in the gradebook keeps for the id it was given
(:meth:`~grader.instructor.gradebook.Gradebook.stored_submissions`): where that is another hand-in (another file
name and other content) that claims the id as well or better (:func:`claim_rank`: the roster's file pattern, then
one file named exactly as the id, a container so named, a case variant, then any other name, ``attnkit submit``'s
``submission-<id>-<date>`` among them), the new one takes no id: it is graded under ``<id>-<8 hex digits>`` with a
note, exactly as it would be had both been collected in one run.  The same file name collected again (an updated
download) or the same content is the same hand-in, and keeps the id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from grader.handin import safe_name
from grader.instructor.identify import ATTNKIT_NAME, ID_HASH_CHARS, PATTERN_RANK, VARIANT_RANK, hashed_id, name_rank
from grader.instructor.identify import claim_rank as name_claim_rank
from grader.instructor.intake_model import Intake, Submission, name_of, note, stem_of
from grader.instructor.roster import Roster

OTHER_RANK = VARIANT_RANK + 1
"""Any name that names its id less well than a case variant: sanitised, or ``attnkit submit``'s claim."""


def claim_rank(source: str, student: str, roster: Roster | None) -> int:
    """How well the hand-in collected as ``source`` claims the id ``student`` (lower is better), on the scale of
    :data:`~grader.instructor.identify.PATTERN_RANK` .. :data:`OTHER_RANK`."""
    path = Path(source)
    name, stem = name_of(path), stem_of(path)
    entry = next((e for e in roster.entries if e.id.lower() == student.lower()), None) if roster else None
    if entry is not None and entry in roster.by_pattern(name):  # type: ignore[union-attr]
        return PATTERN_RANK
    probe = Submission(student, source, "py")
    if entry is not None and safe_name(stem, "") == stem and roster.by_name(stem) == entry:  # type: ignore[union-attr]
        return name_rank(probe, entry)
    if ATTNKIT_NAME.fullmatch(safe_name(stem)):
        return OTHER_RANK
    return name_claim_rank(probe) + 1  # 0 one file named exactly, 1 a container, 2 a case variant, 3 sanitised


def _same_hand_in(sub: Submission, held: Submission) -> bool:
    return name_of(Path(sub.source)) == name_of(Path(held.source)) or bool(sub.sha256 and sub.sha256 == held.sha256)


def keep_held_ids(intake: Intake, held: Mapping[str, Submission]) -> Intake:
    """``intake`` with every hand-in that would take an id ``held`` keeps for another, equally or better claiming
    hand-in graded under an id of its own instead, with a note saying whose it is."""
    kept = {student.lower(): sub for student, sub in held.items()}
    roster = intake.roster
    taken = {sub.student.lower() for sub in intake.submissions} | set(kept)
    renamed: list[str] = []
    for sub in intake.submissions:
        earlier = kept.get(sub.student.lower())
        if earlier is None or _same_hand_in(sub, earlier):
            continue
        if claim_rank(earlier.source, earlier.student, roster) > claim_rank(sub.source, sub.student, roster):
            continue
        name = name_of(Path(sub.source))
        seeds = [(name, ID_HASH_CHARS), (sub.source, 16), (sub.source, 64)]
        new = next(c for seed, n in seeds if (c := hashed_id(sub.student, seed, n)).lower() not in taken or n == 64)
        note(sub, f"{name!r}: the id {sub.student!r} is held in this out folder's gradebook by "
                  f"{name_of(Path(earlier.source))!r}, another hand-in that claims it as well or better: graded "
                  f"as {new!r}")  # fmt: skip
        taken.add(new.lower())
        sub.student = new
        renamed.append(new)
    if not renamed:
        return intake
    found = {sub.student.lower() for sub in intake.submissions}
    return dataclasses.replace(
        intake,
        notes=[note for sub in intake.submissions for note in sub.notes],
        missing=[e for e in roster.entries if e.id.lower() not in found] if roster is not None else [],
        unmatched=sorted({*intake.unmatched, *renamed}) if roster is not None else intake.unmatched,
    )
