"""Who each hand-in belongs to: its student id, settled among all the hand-ins of one run (:func:`identify`).

The id comes from what the instructor collected, never from what the learner wrote: a roster student's file
pattern, the roster student a hand-in's name names, else its own name made safe and unique
(:func:`deduplicate_ids`).  ``attnkit submit``'s name (:data:`ATTNKIT_NAME`) and a manifest's id are only claims.
Every id decision worth reading is a note on the hand-in, one inert line
(:func:`~grader.instructor.intake_model.note`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable
from pathlib import Path

from grader.handin import MAX_NAME_LENGTH, safe_name
from grader.instructor.inert import inert_line
from grader.instructor.intake_model import (
    Intake,
    IntakeError,
    Skipped,
    Submission,
    id_from_path,
    name_of,
    note,
    stem_of,
)
from grader.instructor.out_folder import CLASS_FILES
from grader.instructor.roster import Roster, RosterEntry

RESERVED_IDS = frozenset(name.lower() for name in CLASS_FILES)
"""The files ``attnkit grade`` writes beside the student folders (lower case): no student may take one."""

CANONICAL_SUFFIXES = ("", ".py", ".zip", ".ipynb")
"""A file whose name is ``<id><suffix>`` with one of these (lower case) suffixes names its id exactly."""
ONE_FILE_SUFFIXES = (".py", ".ipynb")
"""Hand-ins of one file of code; a ``.zip`` or folder is a container, named by whoever packed it, so it claims an
id less well than one file so named (:func:`claim_rank`)."""

ID_HASH_CHARS = 8
"""Hex digits of sha256 added to an id that collides: ``a_b-1c2d3e4f``."""


def claim_rank(sub: Submission) -> int:
    """How strongly a submission claims its id: 0 its name is exactly the id and it is one file (``alice.py``,
    ``alice.ipynb``), 1 a container so named (``alice.zip``, ``alice/``), 2 the same up to case, 3 sanitised."""
    name = name_of(Path(sub.source))
    for suffix in CANONICAL_SUFFIXES:
        if name == sub.student + suffix:
            return 2 if sub.student != sub.student.lower() else 0 if suffix in ONE_FILE_SUFFIXES else 1
    return 3


def hashed_id(base: str, seed: str, length: int) -> str:
    digest = hashlib.sha256(seed.encode("utf-8", "surrogateescape")).hexdigest()[:length]
    return f"{base[: MAX_NAME_LENGTH - length - 1]}-{digest}"


def deduplicate_ids(
    submissions: list[Submission],
    owned: Iterable[str] = (),
    roster_ids: Iterable[str] = (),
    given: Collection[str] = (),
) -> list[Submission]:
    """Make student ids unique (ignoring case, for macOS and Windows), whatever order the submissions come in.

    Among several claimants of an id, the single best by :func:`claim_rank` keeps it; every other, and all when no
    single one is best, gets ``<id>-<8 hex digits of sha256 of its file name>`` (of its path where names tie).
    Never kept: a file the grader writes (``grades.csv`` …), an id in ``owned`` (other hand-ins', a roster's), a
    roster student's id (``roster_ids``: these names do not name the student).  Each change is noted why.
    """
    claims: dict[str, list[Submission]] = {}
    for sub in submissions:
        claims.setdefault(sub.student.lower(), []).append(sub)
    owned = {name.lower() for name in owned}
    listed = {name.lower() for name in roster_ids} - owned
    taken = {name.lower() for name in RESERVED_IDS} | owned | listed
    renamed: list[tuple[Submission, str]] = []  # (submission, why)
    for key, subs in claims.items():
        blocked = (
            (RESERVED_IDS, "is the name of a file attnkit grade writes"),
            (owned, "is the roster's id of another hand-in"),
            (listed, "is a roster student's id, which this name names only once sanitised"),
        )
        why = next((why for keys, why in blocked if key in keys), None)
        if why is not None:  # a roster student's id is said as the first claimant spells it
            renamed += [(sub, f"{(subs[0] if why == blocked[2][1] else sub).student!r} {why}") for sub in subs]
            continue
        ranks = [claim_rank(sub) - (sub.source in given and claim_rank(sub) < 2) * 2 for sub in subs]
        best = [sub for sub, rank in zip(subs, ranks) if rank == min(ranks)]
        keeper = best[0] if len(best) == 1 else None
        if keeper is not None:
            taken.add(key)
        shown = _listed(sorted({name_of(Path(sub.source)) for sub in subs}), 4)
        kept = f", kept by {name_of(Path(keeper.source))!r}" if keeper is not None else ""
        for sub in [sub for sub in subs if sub is not keeper]:
            packed = f" ({PACKED_LOSES})" if keeper is not None and min(ranks) == 0 and claim_rank(sub) == 1 else ""
            renamed.append((sub, f"{sub.student!r} is claimed by {len(subs)} submissions ({shown}){kept}{packed}"))
    # The hash of the file name, or of the whole path where two names are the same; identical paths
    # (the same file given twice) are told apart by a counter, which cannot depend on anything else.
    names = [name_of(Path(sub.source)) for sub, _ in renamed]
    seeds = [name if names.count(name) == 1 else sub.source for (sub, _), name in zip(renamed, names)]
    for i, seed in enumerate(seeds):
        if seeds.count(seed) > 1:
            seeds[i] = f"{seed}#{seeds[: i + 1].count(seed)}"
    for (sub, why), seed in sorted(zip(renamed, seeds), key=lambda item: item[1]):
        candidate, n = hashed_id(sub.student, seed, ID_HASH_CHARS), 0
        while candidate.lower() in taken:  # a real file named like a hashed id keeps its name
            n += 1
            candidate = hashed_id(sub.student, f"{seed}#{n}", 2 * ID_HASH_CHARS)
        taken.add(candidate.lower())
        note(sub, f"{name_of(Path(sub.source))!r} was given the id {candidate!r}: {why}")
        sub.student = candidate
    for sub in submissions:  # an id its name gives only once made safe (ｂｏｂ → bob, =SUM(1) → _SUM_1_): said too
        stem = stem_of(Path(sub.source))
        if not sub.notes and sub.student != stem and sub.student == safe_name(stem):
            note(sub, f"{name_of(Path(sub.source))!r} was given the id {sub.student!r}: its name made safe "
                      "(only letters, digits, '.', '_' and '-' are kept)")  # fmt: skip
    return submissions


ATTNKIT_NAME = re.compile(r"submission-(.+)-\d{4}-\d{2}-\d{2}(?:-\d+)?")
"""The name ``attnkit submit`` gives a hand-in (its stem): ``submission-<id>-<date>[-n]``.  Its ``<id>`` is the
learner's own ``--student`` (or login): a claim, like the manifest's (:func:`identify`)."""


def _by_file_name(roster: Roster, sub: Submission) -> RosterEntry | None:
    """The student a hand-in's stem names (id, email or its local part), or None.  Only a name that is already a
    safe id names anyone: one that had to be sanitised (``ａｌｉｃｅ.py``, a confusable of an id) names no one."""
    stem = stem_of(Path(sub.source))
    return roster.by_name(stem) if safe_name(stem, "") == stem else None


PATTERN_RANK, EXACT_RANK, PACKED_RANK, VARIANT_RANK = 0, 1, 2, 3
"""How well a hand-in claims its roster student: by the student's file pattern, by one file of code named exactly
as one of the student's names (:func:`name_rank`), by a container so named, by a name equal only up to case."""

PACKED_LOSES = "one file named as the id outranks a .zip or folder of that name: whoever packs a container names it"


def name_rank(sub: Submission, entry: RosterEntry) -> int:
    """:data:`EXACT_RANK` for a ``.py``/``.ipynb`` named exactly as one of ``entry``'s names (as spelled or in lower
    case), :data:`PACKED_RANK` for a ``.zip`` or folder so named; else :data:`VARIANT_RANK` (``Alice.py``)."""
    name, stem = name_of(Path(sub.source)), stem_of(Path(sub.source))
    spelled = {entry.id, *((safe_name(entry.email), safe_name(entry.email.split("@", 1)[0])) if entry.email else ())}
    spelled |= {n.lower() for n in spelled}
    suffix = name[len(stem) :]
    if stem not in spelled or suffix not in CANONICAL_SUFFIXES:
        return VARIANT_RANK
    return EXACT_RANK if suffix in ONE_FILE_SUFFIXES else PACKED_RANK


def _name_claim(sub: Submission, roster: Roster | None) -> tuple[str, RosterEntry | None] | None:
    """The id a name in ``attnkit submit``'s form claims (:data:`ATTNKIT_NAME`) and the roster student it names
    (only where the name is already a safe id, as :func:`_by_file_name`), or None for any other name."""
    stem = stem_of(Path(sub.source))
    if (made := ATTNKIT_NAME.fullmatch(safe_name(stem))) is None:
        return None
    entry = roster.by_name(made.group(1)) if roster is not None and safe_name(stem, "") == stem else None
    return safe_name(made.group(1)), entry


CLAIMED = "attnkit submit's name, from the learner's own --student"


def _listed(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(repr(name) for name in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


_Claims = dict[str, list[tuple[Submission, str, RosterEntry | None]]]
"""Names in attnkit submit's form by the lower-case id they claim: (hand-in, the id, the roster student it names)."""


def _settle_name_claims(
    claims: _Claims, owned: dict[str, list[Submission]], named: list[Submission], with_roster: bool
) -> tuple[list[tuple[Submission, RosterEntry | None]], list[Submission]]:
    """Which names in attnkit submit's form (``claims``, by lower-case id) get that id (granted, with the roster
    student it names), which are graded under their whole stem (disowned, noted why): granted only where no
    hand-in holds the id by a collected name (``owned``, ``named``), it is no reserved name and no other claims it."""
    held: dict[str, list[str]] = {}
    for sub in [*(sub for subs in owned.values() for sub in subs), *named]:  # an owned one's id is its key
        held.setdefault(sub.student.lower(), []).append(name_of(Path(sub.source)))
    granted: list[tuple[Submission, RosterEntry | None]] = []
    disowned: list[Submission] = []
    for key, group in sorted(claims.items()):
        for sub, claimed, entry in group:
            source = name_of(Path(sub.source))
            wanted = entry.id if entry is not None else claimed
            others = sorted(name_of(Path(other.source)) for other, _, _ in group if other is not sub)
            if key in held:
                why = f"which {_listed(sorted(held[key]))} has"
            elif key in RESERVED_IDS:
                why = "the name of a file attnkit grade writes"
            elif others:
                theirs = wanted + (Path(source).suffix if not Path(sub.source).is_dir() else "")
                why = f"as {_listed(others)} does too: no one of them takes it (rename the one that is theirs "
                why += f"{theirs!r})"
            else:
                sub.student = wanted
                granted.append((sub, entry))
                if with_roster and entry is not None:
                    note(sub, f"{source!r}: graded as {wanted!r}, whom its name claims ({CLAIMED}); no roster pattern "
                              "confirms it")  # fmt: skip
                continue
            sub.student = id_from_path(Path(sub.source))
            note(sub, f"{source!r}: its name claims the id {wanted!r} ({CLAIMED}), {why}: graded as {sub.student!r}")
            disowned.append(sub)
    return granted, disowned


def identify(
    subs: list[Submission],
    skipped: list[Skipped] | None = None,
    *,
    roster: Roster | None = None,
    latest: bool = False,
    given: Collection[str] = (),
) -> Intake:
    """Give every submission its student id, whatever order they come in; :class:`IntakeError` when it cannot.

    The id comes from what the instructor collected, never from what the learner wrote: 1. with a roster, the
    student whose file ``pattern`` matches its name (two patterns: an error row, never a refusal of the class);
    2. with a roster, the student its stem names when it is already a safe id; 3. its sanitised stem, made unique
    (:func:`deduplicate_ids`).  A name in attnkit submit's form (:data:`ATTNKIT_NAME`) is only a claim, never in a
    ``--latest`` contest (:func:`_settle_name_claims`); a manifest's id only confirms (:func:`_check_claim`); a
    student's less exact names take no roster id (:func:`_demote_weaker_claims`); equally good ones are an error row
    unless ``latest`` (:func:`_latest_of_each`).  Hand-ins off the roster are graded under their own id and listed
    in ``unmatched`` (shown, not dropped); roster students without a hand-in are ``missing``.
    """
    skipped = list(skipped or [])
    if roster is not None and (reserved := [e.id for e in roster.entries if e.id.lower() in RESERVED_IDS]):
        raise IntakeError(f"roster: the id {reserved[0]!r} is the name of a file attnkit grade writes; rename it")
    owned: dict[str, list[Submission]] = {}
    named: list[Submission] = []
    off_roster: list[Submission] = []
    entries: dict[int, RosterEntry] = {}
    claims: _Claims = {}

    ranks: dict[int, int] = {}

    def own(sub: Submission, entry: RosterEntry, rank: int) -> None:
        sub.student, entries[id(sub)], ranks[id(sub)] = entry.id, entry, rank
        owned.setdefault(entry.id.lower(), []).append(sub)

    for sub in subs:
        name = name_of(Path(sub.source))
        hits = roster.by_pattern(name) if roster is not None else []
        claim = _name_claim(sub, roster)
        if len(hits) > 1:
            why = f"{name!r} matches the file patterns of {', '.join(e.id for e in hits)}"
            if sub.error is None:
                sub.error = f"{why}: not graded until the roster's patterns tell them apart"
            else:
                note(sub, f"{why}: make the roster's patterns tell them apart")
        elif hits:
            own(sub, hits[0], PATTERN_RANK)
            continue
        elif roster is not None and (entry := _by_file_name(roster, sub)) is not None:
            rank = name_rank(sub, entry)
            own(sub, entry, PATTERN_RANK if sub.source in given and rank < VARIANT_RANK else rank)
            continue
        elif claim is not None:
            claimed, entry = claim
            claims.setdefault((entry.id if entry is not None else claimed).lower(), []).append((sub, claimed, entry))
            continue
        elif roster is not None:
            off_roster.append(sub)
        sub.student = id_from_path(Path(sub.source))
        named.append(sub)
    granted, disowned = _settle_name_claims(claims, owned, named, roster is not None)
    for sub, entry in granted:
        if entry is not None:
            own(sub, entry, VARIANT_RANK)
        else:
            named.append(sub)
            off_roster += [sub] if roster is not None else []
    named += disowned
    demoted = _demote_weaker_claims(owned, ranks)
    for sub in demoted:
        entries.pop(id(sub))
        sub.student = id_from_path(Path(sub.source))
    named += demoted
    losers = _latest_of_each(owned, latest)
    skipped += [Skipped(sub.source, why) for sub, why in losers]
    dropped = {id(sub) for sub, _ in losers}
    kept = [sub for sub in subs if id(sub) not in dropped]
    roster_ids = [e.id for e in roster.entries] if roster is not None else ()
    deduplicate_ids(named, owned=owned, roster_ids=roster_ids, given=given)
    name_claims = {id(sub): claimed for group in claims.values() for sub, claimed, _ in group}
    for sub in kept:
        _check_claim(sub, entries.get(id(sub)), roster, name_claims.get(id(sub)))
    for sub in [sub for sub in off_roster if id(sub) not in dropped]:
        note(sub, f"{name_of(Path(sub.source))!r} matches no one on the roster: graded as {sub.student!r}")
    found = {sub.student.lower() for sub in kept}
    missing = [e for e in roster.entries if e.id.lower() not in found] if roster is not None else []
    strays = [*off_roster, *demoted, *(disowned if roster is not None else [])]
    unmatched = {sub.student for sub in strays if id(sub) not in dropped}
    return Intake(kept, skipped, missing, [note for sub in kept for note in sub.notes], roster, sorted(unmatched))


def _check_claim(sub: Submission, entry: RosterEntry | None, roster: Roster | None, named: str | None) -> None:
    """A note on ``sub`` when its manifest claims another id than the one it was given (a claim only confirms),
    unless its name claims the same (``named``, attnkit submit's ``<id>``: its note says it already)."""
    claim = sub.claimed
    own = entry.names if entry is not None else {sub.student.lower()}
    if claim is None or claim.lower() in own or (named is not None and safe_name(claim).lower() == named.lower()):
        return
    whose = roster.by_name(claim) if roster is not None and entry is None else None
    hint = f" ({whose.id} on the roster: if it is theirs, give the roster a file pattern for it)" if whose else ""
    note(sub, f"{name_of(Path(sub.source))!r}: its manifest claims the id {claim!r}{hint}; graded as "
              f"{sub.student!r}, the id its file name gives (a manifest's id only confirms it)")  # fmt: skip


def _demote_weaker_claims(owned: dict[str, list[Submission]], ranks: dict[int, int]) -> list[Submission]:
    """The hand-ins that claim their roster student less well than another of theirs (:data:`PATTERN_RANK` …):
    removed from ``owned``, each noted; graded under their own id (``--latest`` orders only equally good claims)."""
    demoted: list[Submission] = []
    for subs in owned.values():
        best = min(ranks[id(sub)] for sub in subs)
        strong = sorted(name_of(Path(sub.source)) for sub in subs if ranks[id(sub)] == best)
        for sub in [sub for sub in subs if ranks[id(sub)] > best]:
            how = "its file pattern" if best == PATTERN_RANK else "an exact name"
            how = PACKED_LOSES if best == EXACT_RANK and ranks[id(sub)] == PACKED_RANK else how
            note(sub, f"{name_of(Path(sub.source))!r} names {sub.student} less exactly than {_listed(strong)} "
                      f"({how}): it takes no roster id")  # fmt: skip
            demoted.append(sub)
            subs.remove(sub)
    return demoted


def _latest_of_each(owned: dict[str, list[Submission]], latest: bool) -> list[tuple[Submission, str]]:
    """The hand-ins another of the same student's supersedes, with why.  Without ``latest``, or where it cannot tell
    the last (by ``collected``), the first by name is an error row naming them, the others skipped."""
    losers: list[tuple[Submission, str]] = []
    for _, subs in sorted(owned.items()):
        if len(subs) < 2:
            continue
        subs = sorted(subs, key=lambda s: name_of(Path(s.source)))
        names = [name_of(Path(s.source)) for s in subs]
        untimed = [s for s in subs if s.collected is None]
        newest = max((s.collected for s in subs if s.collected is not None), default=None)
        best = [s for s in subs if s.collected == newest]
        if not latest:
            why = "pass --latest to grade the one collected last, or remove the ones not to grade"
        elif untimed:
            why = f"--latest cannot choose: {_listed([name_of(Path(s.source)) for s in untimed])}: no time known"
        elif len(best) > 1:
            why = f"--latest cannot choose: {_listed([name_of(Path(s.source)) for s in best])} were collected at " \
                  "the same time"  # fmt: skip
        else:
            winner = name_of(Path(best[0].source))
            for sub in [sub for sub in subs if sub is not best[0]]:
                then = sub.collected.isoformat() if sub.collected else "?"
                losers.append((sub, inert_line(
                    f"superseded by {winner!r} ({sub.student}'s latest hand-in, collected "
                    f"{newest.isoformat() if newest else '?'}; this one {then})")))  # fmt: skip
            continue
        row = subs[0]
        row.error = inert_line(
            f"two or more hand-ins for {row.student} ({_listed(names, 6)}): not graded; {why}, then grade again"
        )
        losers += [(sub, inert_line(f"one of {row.student}'s {len(subs)} hand-ins: see that row")) for sub in subs[1:]]
    return losers
