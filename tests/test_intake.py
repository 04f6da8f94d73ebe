"""Reading submissions: formats, layouts, ids, and hostile input refused with one clear line."""

from __future__ import annotations

import hashlib
import io
import itertools
import os
import stat
import struct
import sys
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from grader.handin import MAX_ENTRIES, safe_name
from grader.instructor import handin_reading
from grader.instructor.handin_reading import files_sha256, read_submission
from grader.instructor.identify import deduplicate_ids
from grader.instructor.intake import collect, collect_submissions
from grader.instructor.intake_model import Submission, id_from_path

GOOD = "import torch\n\n\ndef dot_product_scores(queries, keys):\n    return queries @ keys.transpose(-2, -1)\n"


def write(path: Path, text: str | bytes = GOOD) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def make_zip(path: Path, entries: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(zipfile.ZipInfo(name), data)
    return path


# --- formats and layouts -------------------------------------------------------------------


def test_py_file(tmp_path):
    sub = read_submission(write(tmp_path / "alice.py"))
    assert sub.error is None
    assert (sub.student, sub.format, sub.entry) == ("alice", "py", "alice.py")
    assert sub.files == {"alice.py": GOOD}
    assert sub.sha256 == files_sha256(sub.files)
    assert sub.load_message() == {"op": "load", "files": {"alice.py": GOOD}, "entry": "alice.py"}


def test_loose_folder_keeps_its_name_and_skips_tests_caches_and_hidden(tmp_path):
    root = tmp_path / "bob"
    write(root / "scores.py")
    write(root / "helpers" / "util.py", "X = 1\n")
    write(root / "test_scores.py", "raise SystemExit\n")
    write(root / "scores_test.py", "raise SystemExit\n")  # pytest's other pattern, as attnkit submit leaves out
    write(root / "conftest.py", "raise SystemExit\n")
    write(root / "__pycache__" / "scores.py", "junk\n")
    write(root / ".ipynb_checkpoints" / "x.py", "junk\n")
    write(root / ".git" / "hook.py", "junk\n")
    write(root / ".hidden.py", "junk\n")
    write(root / "notes.txt", "not python\n")
    sub = read_submission(root)
    assert sub.error is None
    assert (sub.student, sub.format, sub.entry) == ("bob", "folder", "bob")
    assert sorted(sub.files) == ["bob/helpers/util.py", "bob/scores.py"]


def test_package_folder_is_entry_by_its_own_name(tmp_path):
    root = tmp_path / "carol"
    write(root / "__init__.py", "from carol.scores import dot_product_scores\n")
    write(root / "scores.py")
    sub = read_submission(root)
    assert sub.entry == "carol"
    assert sorted(sub.files) == ["carol/__init__.py", "carol/scores.py"]


def test_learners_whole_kit_grades_its_exercises_package(tmp_path):
    root = tmp_path / "dave"
    write(root / "conftest.py", "import pytest\n")
    write(root / "exercises" / "__init__.py", "")
    write(root / "exercises" / "scores.py", "from exercises._expect import nothing\n")
    write(root / "exercises" / "_expect.py", "nothing = None\n")
    write(root / "exercises" / "test_scores.py", "def test(): pass\n")
    write(root / "scratch.py", "print('experiments')\n")
    write(root / "notebooks" / "x.ipynb", "{}")
    sub = read_submission(root)
    assert sub.error is None
    assert sub.student == "dave"
    assert sub.entry == "exercises"
    assert sorted(sub.files) == ["exercises/__init__.py", "exercises/_expect.py", "exercises/scores.py"]


def test_kit_layout_imports_with_absolute_imports_as_the_child_would(tmp_path):
    """The files and entry, written out as the child does, import with ``from exercises.x import y``."""
    from grader.child.load import import_submission

    kit = tmp_path / "erin"
    write(kit / "exercises" / "__init__.py", "")
    write(kit / "exercises" / "helpers.py", "SCALE = 2\n")
    write(kit / "exercises" / "scores.py", "from exercises.helpers import SCALE\n\ndef dot_product_scores(q, k):\n"
                                            "    return SCALE\n")
    sub = read_submission(kit)
    root = tmp_path / "child"
    for rel, text in sub.files.items():
        write(root / rel, text)
    modules = import_submission(root / sub.entry)
    assert any(getattr(m, "dot_product_scores", None) and m.dot_product_scores(1, 2) == 2 for m in modules)


def test_one_file_with_postponed_annotations_and_a_dataclass_imports(tmp_path):
    """Honest code: ``from __future__ import annotations`` plus ``@dataclass`` (dataclasses looks the module up
    in ``sys.modules``), as ``import`` would load it; round 5's h_dc2 was failed as "does not import"."""
    from grader.child.load import import_submission

    write(tmp_path / "carol.py", "from __future__ import annotations\nfrom dataclasses import dataclass\n\n"
                                 "@dataclass\nclass Config:\n    d_in: int\n    dropout: float = 0.1\n")
    (module,) = import_submission(tmp_path / "carol.py")
    assert module.Config(3).d_in == 3
    assert module.__name__ not in sys.modules  # gone once loaded, as the submission's modules are


@pytest.mark.parametrize("layout", ["file", "package", "folder"])
def test_kept_modules_let_typing_read_string_annotations_when_calls_run(tmp_path, layout):
    """Round 6's F1: ``typing.get_type_hints`` inside a hook, on a class whose string annotation names a module
    global, looks the class's module up in ``sys.modules`` when the call runs; the learner's process keeps it."""
    from grader.child.load import import_submission_parts

    code = ("from __future__ import annotations\nimport typing\nfrom dataclasses import dataclass\n"
            "from typing import Optional\n\n@dataclass\nclass Cfg:\n    heads: Optional[int] = None\n\n"
            "def hints():\n    return typing.get_type_hints(Cfg)\n")  # fmt: skip
    target = {"file": tmp_path / "dana.py", "package": tmp_path / "pkg" / "__init__.py",
              "folder": tmp_path / "work" / "attention.py"}[layout]  # fmt: skip
    write(target, code)
    entry = target if layout == "file" else target.parent
    before = set(sys.modules)
    try:
        modules, _ = import_submission_parts(entry, keep=True)
        (module,) = [m for m in modules if hasattr(m, "hints")]
        assert module.hints() == {"heads": int | None}
    finally:
        for name in set(sys.modules) - before:
            del sys.modules[name]


@pytest.mark.parametrize(
    "entries, entry, keys",
    [
        ({"frank/scores.py": GOOD, "frank/masking.py": "X = 1\n"}, "frank", ["frank/masking.py", "frank/scores.py"]),
        ({"scores.py": GOOD, "masking.py": "X = 1\n"}, "sub", ["sub/masking.py", "sub/scores.py"]),
        ({"solution.py": GOOD, "README.md": "hi"}, "solution.py", ["solution.py"]),
        ({"kit/exercises/__init__.py": "", "kit/exercises/scores.py": GOOD, "kit/README.md": "x"},
         "exercises", ["exercises/__init__.py", "exercises/scores.py"]),
        ({"pkg/__init__.py": "", "pkg/scores.py": GOOD}, "pkg", ["pkg/__init__.py", "pkg/scores.py"]),
        ({"g/scores.py": GOOD, "__MACOSX/g/._scores.py": b"\x00\x05", "g/.DS_Store": b"\x00"}, "g", ["g/scores.py"]),
    ],
    ids=["one-top-folder-unwrapped", "loose-files-at-top", "single-py", "kit-in-folder", "package", "macos-junk"],
)
def test_zip_layouts(tmp_path, entries, entry, keys):
    sub = read_submission(make_zip(tmp_path / "sub.zip", entries))
    assert sub.error is None, sub.error
    assert (sub.student, sub.format, sub.entry) == ("sub", "zip", entry)
    assert sorted(sub.files) == keys


def test_zip_of_a_folder_hashes_like_the_folder(tmp_path):
    root = tmp_path / "gina"
    write(root / "scores.py")
    write(root / "masking.py", "Y = 2\n")
    make_zip(tmp_path / "gina.zip", {"gina/scores.py": GOOD, "gina/masking.py": "Y = 2\n"})
    folder, zipped = read_submission(root), read_submission(tmp_path / "gina.zip")
    assert folder.files == zipped.files
    assert folder.sha256 == zipped.sha256
    write(root / "masking.py", "Y = 3\n")
    assert read_submission(root).sha256 != folder.sha256


def test_sha256_does_not_confuse_path_and_text_boundaries():
    assert files_sha256({"a.py": "bc"}) != files_sha256({"a.pyb": "c"})
    assert files_sha256({"a.py": "x", "b.py": "y"}) == files_sha256({"b.py": "y", "a.py": "x"})


def test_notebook_with_converter_becomes_one_py(tmp_path, monkeypatch):
    monkeypatch.setattr(handin_reading, "notebook_to_source", lambda text: "X = 1\n")
    sub = read_submission(write(tmp_path / "jo.ipynb", '{"cells": []}'))
    assert sub.error is None
    assert (sub.format, sub.entry, sub.files) == ("ipynb", "jo.py", {"jo.py": "X = 1\n"})


def test_notebook_converter_error_is_one_line(tmp_path, monkeypatch):
    def broken(text):
        raise ValueError("invalid JSON at line 1\nmore detail")

    monkeypatch.setattr(handin_reading, "notebook_to_source", broken)
    sub = read_submission(write(tmp_path / "kim.ipynb", "{"))
    assert sub.error == "kim.ipynb: invalid JSON at line 1"


# --- hostile input ---------------------------------------------------------------------------


def _zip_with_info(path: Path, info: zipfile.ZipInfo, data: bytes = b"X = 1\n") -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("ok.py", GOOD)
        zf.writestr(info, data)
    return path


def _symlink_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize(
    "info, expected",
    [
        (zipfile.ZipInfo("../evil.py"), "refused zip: entry '../evil.py' points outside the archive"),
        (zipfile.ZipInfo("a/../../evil.py"), "points outside the archive"),
        (zipfile.ZipInfo("..\\evil.py"), "points outside the archive"),
        (zipfile.ZipInfo("/etc/evil.py"), "is an absolute path"),
        (zipfile.ZipInfo("C:/evil.py"), "is an absolute path"),
        (_symlink_info("link.py"), "refused zip: entry 'link.py' is a symbolic link"),
    ],
    ids=["dotdot", "nested-dotdot", "backslash-dotdot", "absolute", "drive-letter", "symlink"],
)
def test_hostile_zip_entries_are_refused(tmp_path, info, expected):
    path = _zip_with_info(tmp_path / "mallory.zip", info, b"/etc/passwd" if "link" in info.filename else b"X = 1\n")
    sub = read_submission(path)
    assert sub.error is not None and expected in sub.error
    assert sub.error.startswith("refused zip:")
    assert sub.files == {} and sub.student == "mallory" and sub.format == "zip"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mallory.zip"]  # nothing unpacked anywhere


def _zeros_zip(path: Path, name: str, size: int) -> Path:
    """A small zip whose one entry unpacks to ``size`` zero bytes (written in chunks)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open(name, "w", force_zip64=True) as fh:
            chunk = b"\0" * (1 << 20)
            for _ in range(size // len(chunk)):
                fh.write(chunk)
    return path


def test_zip_bomb_by_declared_size_is_refused_without_unpacking(tmp_path):
    path = _zeros_zip(tmp_path / "bomb.zip", "data.bin", 60 << 20)
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        sub = read_submission(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sub.error == "refused zip: 60 MB unpacked is over the 50 MB limit"
    assert peak < 5 << 20


def _lie_about_sizes(path: Path, declared: int) -> None:
    """Rewrite every uncompressed-size field (local headers and central directory) to ``declared``."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (at := data.find(signature, start)) != -1:
            struct.pack_into("<I", data, at + offset, declared)
            start = at + 4
    path.write_bytes(bytes(data))


def test_zip_bomb_lying_about_its_size_is_refused_while_reading(tmp_path):
    path = tmp_path / "liar.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("liar.py", b"#" * (8 << 20))  # a .py that unpacks to 8 MB...
    _lie_about_sizes(path, 100)  # ...declared as 100 bytes
    assert zipfile.ZipFile(path).getinfo("liar.py").file_size == 100
    tracemalloc.start()
    try:
        sub = read_submission(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sub.error is not None and sub.error.startswith("refused zip:")
    assert peak < 5 << 20


def test_zip_with_a_big_py_is_refused(tmp_path):
    path = make_zip(tmp_path / "big.zip", {"big.py": "#" * int(2.3 * (1 << 20))})
    assert read_submission(path).error == "refused zip: big.py: 2.3 MB .py file is over the 1 MB limit"


def test_zip_with_too_many_entries_is_refused(tmp_path):
    path = make_zip(tmp_path / "many.zip", {f"m{i}.py": "" for i in range(MAX_ENTRIES + 1)})
    expected = f"refused zip: {MAX_ENTRIES + 1} entries is over the {MAX_ENTRIES} entry limit"
    assert read_submission(path).error == expected


def test_not_a_zip_is_refused(tmp_path):
    sub = read_submission(write(tmp_path / "fake.zip", b"this is not a zip"))
    assert sub.error is not None and sub.error.startswith("refused zip: not a readable zip archive")


def test_corrupt_zip_data_is_refused(tmp_path):
    path = make_zip(tmp_path / "corrupt.zip", {"corrupt.py": GOOD * 50})
    data = bytearray(path.read_bytes())
    data[60:80] = b"\xff" * 20  # inside the compressed stream
    path.write_bytes(bytes(data))
    sub = read_submission(path)
    assert sub.error is not None and sub.error.startswith("refused zip:")


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"x = 1\n\xff\xfe = 2\n", "bad.py: not valid UTF-8 at byte 6"),
        (b"x = 1\n\x00\n", "bad.py: contains a null byte (at byte 6)"),
    ],
    ids=["invalid-utf8", "null-byte"],
)
@pytest.mark.parametrize("container", ["py", "folder", "zip"])
def test_bad_text_is_refused(tmp_path, data, expected, container):
    if container == "py":
        path = write(tmp_path / "bad.py", data)
    elif container == "folder":
        path = tmp_path / "bad"
        write(path / "bad.py", data)
    else:
        path = make_zip(tmp_path / "bad.zip", {"bad.py": data})
    sub = read_submission(path)
    assert sub.error == expected
    assert sub.files == {}


def test_utf8_bom_is_accepted(tmp_path):
    sub = read_submission(write(tmp_path / "bom.py", b"\xef\xbb\xbfX = 1\n"))
    assert sub.error is None and sub.files == {"bom.py": "X = 1\n"}


def test_big_py_file_is_refused_without_reading_it(tmp_path):
    path = write(tmp_path / "huge.py", b"#" * int(2.3 * (1 << 20)))
    sub = read_submission(path)
    assert sub.error == "huge.py: 2.3 MB .py file is over the 1 MB limit"
    assert len(sub.sha256) == 64  # an error row still says which input it was


def test_symlink_inside_a_folder_is_refused(tmp_path):
    secret = write(tmp_path / "secret" / "reference.py", "ANSWER = 42\n")
    root = tmp_path / "nick"
    write(root / "scores.py")
    os.symlink(secret, root / "stolen.py")
    sub = read_submission(root)
    assert sub.error == "refused folder: stolen.py is a symbolic link"
    assert "ANSWER" not in str(sub.files)


def test_folder_without_python_is_an_error(tmp_path):
    root = tmp_path / "empty"
    write(root / "README.md", "hello")
    assert read_submission(root).error == "empty: no .py files to grade"


def test_missing_path_and_unknown_file_are_error_rows(tmp_path):
    missing = read_submission(tmp_path / "ghost.py")
    assert (missing.student, missing.format, missing.error) == ("ghost", "py", "ghost.py: no such file or folder")
    other = read_submission(write(tmp_path / "essay.docx", b"PK"))
    assert other.error is not None and "not a submission" in other.error


# --- student ids ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [("alice smith.py", "alice_smith"), ("Renée.py", "Renee"), ("..sneaky.py", "sneaky"), ("我的.zip", "__")],
    ids=["space", "unicode", "leading-dots", "cjk-zip"],
)
def test_ids_from_odd_file_names(tmp_path, name, expected):
    path = tmp_path / name
    if name.endswith(".zip"):
        make_zip(path, {"s.py": GOOD})
    else:
        write(path)
    assert read_submission(path).student == expected


def test_dotdot_in_the_path_never_reaches_the_id(tmp_path):
    write(tmp_path / "x.py")
    (tmp_path / "sub").mkdir()
    sub = read_submission(str(tmp_path / "sub" / ".." / "x.py"))
    assert sub.student == "x" and sub.error is None


def _hash8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def test_colliding_ids_keep_the_exact_name_and_hash_the_others():
    made = [Submission(safe_name(Path(src).stem), src, "py")
            for src in ["c/alice.py", "c/bob.py", "c/Alice.py", "c/alice.PY", "c/a b.py", "c/a_b.py"]]
    ids = {s.source: s.student for s in deduplicate_ids(made)}
    assert ids == {
        "c/alice.py": "alice",
        "c/bob.py": "bob",
        "c/Alice.py": f"Alice-{_hash8('Alice.py')}",
        "c/alice.PY": f"alice-{_hash8('alice.PY')}",
        "c/a b.py": f"a_b-{_hash8('a b.py')}",
        "c/a_b.py": "a_b",
    }
    notes = {s.source: s.notes for s in made}
    assert notes["c/alice.py"] == notes["c/bob.py"] == notes["c/a_b.py"] == []
    (note,) = notes["c/a b.py"]
    assert note == f"'a b.py' was given the id 'a_b-{_hash8('a b.py')}': 'a_b' is claimed by 2 submissions " \
                   "('a b.py', 'a_b.py'), kept by 'a_b.py'"


# --- collecting a class -------------------------------------------------------------------------


def test_class_folder_members_are_submissions(tmp_path):
    klass = tmp_path / "class"
    write(klass / "alice" / "scores.py")
    write(klass / "bob" / "exercises" / "__init__.py", "")
    write(klass / "bob" / "exercises" / "scores.py")
    make_zip(klass / "carol.zip", {"carol/scores.py": GOOD})
    write(klass / "dan.ipynb", "{}")
    write(klass / "README.md", "the class")
    write(klass / "grades.csv", "x")
    write(klass / ".hidden" / "x.py")
    write(klass / "__pycache__" / "x.py")
    found = collect_submissions([str(klass)])
    assert [(s.student, s.format) for s in found] == [
        ("alice", "folder"), ("bob", "folder"), ("carol", "zip"), ("dan", "ipynb")
    ]
    assert found[1].entry == "exercises"


def test_a_kit_or_a_folder_with_one_python_file_is_one_submission(tmp_path):
    kit = tmp_path / "erin"
    write(kit / "exercises" / "__init__.py", "")
    write(kit / "exercises" / "scores.py")
    lone = tmp_path / "fay"
    write(lone / "scores.py")
    found = collect_submissions([str(kit), str(lone)])
    assert [s.student for s in found] == ["erin", "fay"]


def test_a_folder_of_py_files_is_a_class_whatever_they_define_and_one_only_when_told(tmp_path):
    """Once told apart by the hooks each file defines (the same hook: two learners); that is code a learner writes
    (hooks under ``if True:`` hid them), so a folder of .py files is a class and ``--one`` makes it one."""
    klass = tmp_path / "class"
    write(klass / "alice.py")
    write(klass / "bob.py", GOOD.replace("keys.transpose(-2, -1)", "keys.T"))
    write(klass / "broken.py", "def (:\n")
    write(klass / "carol" / "scores.py")
    modules = tmp_path / "dave"
    write(modules / "scores.py")
    write(modules / "masking.py", "def causal_mask(num_tokens, device=None):\n    return None\n")
    write(modules / "extra" / "more.py", "X = 1\n")
    found = collect_submissions([str(klass)])
    assert [(s.student, s.format) for s in found] == [
        ("alice", "py"), ("bob", "py"), ("broken", "py"), ("carol", "folder")
    ]
    assert [s.student for s in collect_submissions([str(modules)])] == ["extra", "masking", "scores"]
    (one,) = collect([str(modules)], reading="one").submissions
    assert (one.student, one.format, sorted(one.files)) == (
        "dave", "folder", ["dave/extra/more.py", "dave/masking.py", "dave/scores.py"]
    )


def test_a_folder_holding_a_zip_is_a_class_folder(tmp_path):
    klass = tmp_path / "class"
    write(klass / "alice.py")
    make_zip(klass / "bob.zip", {"bob.py": GOOD})
    assert [s.student for s in collect_submissions([str(klass)])] == ["alice", "bob"]


def test_collect_deduplicates_whatever_the_order(tmp_path):
    """Three exact claims of ``alice`` (a folder, a zip, a .py): the one file of code keeps it, the two containers
    each get their own hash."""
    klass = tmp_path / "class"
    write(klass / "alice" / "scores.py")
    make_zip(klass / "alice.zip", {"scores.py": GOOD})
    write(tmp_path / "other" / "alice.py")
    found = collect_submissions([str(klass), str(tmp_path / "other" / "alice.py")])
    assert [s.student for s in found] == [
        f"alice-{_hash8('alice')}", f"alice-{_hash8('alice.zip')}", "alice"
    ]
    assert [s.error is None for s in found] == [True, True, True]
    assert [len(s.notes) for s in found] == [1, 1, 0]
    again = collect_submissions([str(tmp_path / "other" / "alice.py"), str(klass)])
    assert sorted((s.student, s.sha256) for s in again) == sorted((s.student, s.sha256) for s in found)


def test_read_submission_never_raises_on_unreadable_input(tmp_path):
    path = write(tmp_path / "locked.py")
    path.chmod(0)
    try:
        sub = read_submission(path)
    finally:
        path.chmod(0o644)
    if os.geteuid() != 0:
        assert sub.error is not None and "locked.py" in sub.error


def test_zip_member_read_counts_bytes():
    """The byte counter refuses a stream longer than its limit without holding it all."""
    stream = io.BytesIO(b"a" * (3 << 20))
    with pytest.raises(handin_reading.Refused, match="more than 1 MB"):
        handin_reading._read_capped(stream, 1 << 20, "x.py")


SAMPLE_CLASS = Path(__file__).resolve().parents[1] / "examples" / "submissions"


@pytest.mark.skipif(not SAMPLE_CLASS.is_dir(), reason="no sample class in this checkout")
def test_the_sample_class_is_a_class_folder():
    found = collect_submissions([str(SAMPLE_CLASS)])
    assert len(found) > 1
    assert len({s.student for s in found}) == len(found)
    assert all(s.error is None or s.format == "ipynb" for s in found), [s.error for s in found if s.error]


# --- ids that collide, whatever the order ---------------------------------------------------------------------

COLLIDING = ["c/a b.py", "c/a_b.py", "c/alice.PY", "c/alice.py", "c/Alice.py", "c/grades.csv.py", "d/alice.py",
             "c/bob.py", "c/Bob.zip"]


def _ids(sources: list[str]) -> dict[str, str]:
    made = [Submission(id_from_path(Path(src)), src, "py") for src in sources]
    return {s.source: s.student for s in deduplicate_ids(made)}


def test_ids_do_not_depend_on_the_order_the_files_come_in():
    first = _ids(COLLIDING)
    for order in itertools.islice(itertools.permutations(COLLIDING), 0, None, 997):  # ~360 of 362,880 orders
        assert _ids(list(order)) == first, order
    assert len({v.lower() for v in first.values()}) == len(COLLIDING)
    assert first["c/a_b.py"] == "a_b" and first["c/bob.py"] == "bob" and first["c/Bob.zip"].startswith("Bob-")
    # two exact alice.py in two folders: neither keeps "alice", each is hashed by its whole path
    assert first["c/alice.py"] == f"alice-{_hash8('c/alice.py')}"
    assert first["d/alice.py"] == f"alice-{_hash8('d/alice.py')}"
    assert first["c/grades.csv.py"] == f"grades.csv-{_hash8('grades.csv.py')}"


def test_a_real_file_named_like_a_hashed_id_keeps_it():
    taken = f"a_b-{_hash8('a b.py')}"
    ids = _ids(["c/a b.py", "c/a_b.py", f"c/{taken}.py"])
    assert ids["c/a_b.py"] == "a_b" and ids[f"c/{taken}.py"] == taken
    assert ids["c/a b.py"].startswith("a_b-") and ids["c/a b.py"] != taken and len(ids["c/a b.py"]) == 4 + 16


def test_reserved_ids_are_refused_with_a_note(tmp_path):
    klass = tmp_path / "class"
    for name in ("grades.csv.py", "junit.xml.py", "ada.py"):
        write(klass / name)
    found = {s.source.rsplit("/", 1)[-1]: s for s in collect_submissions([str(klass)])}
    assert found["ada.py"].student == "ada" and found["ada.py"].notes == []
    assert found["grades.csv.py"].student == f"grades.csv-{_hash8('grades.csv.py')}"
    assert found["junit.xml.py"].notes == [
        f"'junit.xml.py' was given the id 'junit.xml-{_hash8('junit.xml.py')}': "
        "'junit.xml' is the name of a file attnkit grade writes"
    ]


# --- intake never follows a link --------------------------------------------------------------------------------


SECRET = "SECRET = 'the instructor key'\n" + GOOD


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside the class holding a file and a notebook a link could point at."""
    where = tmp_path / "outside"
    write(where / "secret.py", SECRET)
    write(where / "nb.ipynb", '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}')
    write(where / "pkg" / "scores.py", SECRET)
    return where


@pytest.mark.parametrize(
    "member, target",
    [("mallory.py", "secret.py"), ("mallory.ipynb", "nb.ipynb"), ("mallory", "pkg"), ("mallory.zip", "secret.py")],
    ids=["py", "ipynb", "folder", "zip"],
)
def test_a_linked_class_member_is_an_error_row_never_read(tmp_path, outside, member, target):
    klass = tmp_path / "class"
    write(klass / "alice.py")
    write(klass / "bob.py")
    os.symlink(outside / target, klass / member)
    found = {s.student: s for s in collect_submissions([str(klass)])}
    assert sorted(found) == ["alice", "bob", "mallory"]
    mallory = found["mallory"]
    assert mallory.error == f"{member} is a symbolic link, not followed"
    assert mallory.files == {} and mallory.sha256 == ""


def test_a_notebook_linked_into_a_folder_is_refused(tmp_path, outside):
    folder = tmp_path / "class" / "mallory"
    folder.mkdir(parents=True)
    os.symlink(outside / "nb.ipynb", folder / "work.ipynb")
    sub = read_submission(folder)
    assert (sub.format, sub.error) == ("ipynb", "refused folder: work.ipynb is a symbolic link")


def test_a_linked_path_given_directly_is_refused(tmp_path, outside):
    os.symlink(outside / "secret.py", tmp_path / "link.py")
    sub = read_submission(tmp_path / "link.py")
    assert sub.error == "link.py is a symbolic link, not followed" and sub.files == {}


def test_open_regular_never_follows_a_link_even_if_swapped_in(tmp_path, outside):
    """The open itself refuses a link (O_NOFOLLOW): a link swapped in after the check is not followed either."""
    os.symlink(outside / "secret.py", tmp_path / "swapped.py")
    with pytest.raises(handin_reading.Refused, match="is a symbolic link, not followed"):
        handin_reading._open_regular(tmp_path / "swapped.py", "swapped.py")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.timeout(20)
def test_a_fifo_never_blocks_the_grader(tmp_path):
    folder = tmp_path / "class" / "mallory"
    write(folder / "scores.py")
    os.mkfifo(folder / "helper.py")
    assert read_submission(folder).error == "refused folder: helper.py is not a regular file"
    os.mkfifo(tmp_path / "pipe.py")
    sub = read_submission(tmp_path / "pipe.py")
    assert sub.error == "pipe.py: not a regular file"


# --- review findings come with the submission ---------------------------------------------------------------


def test_a_submission_carries_its_review_findings(tmp_path):
    honest = read_submission(write(tmp_path / "honest.py", GOOD + "\nif __name__ == '__main__':\n    print(1)\n"))
    assert honest.review == []
    sneaky = read_submission(write(tmp_path / "sneaky.py", "import sys\nrt = sys.modules['__main__']\n" + GOOD))
    assert sneaky.review == ['sneaky.py:2: "__main__" as a string', "sneaky.py:2: sys.modules"]
    folder = tmp_path / "pkg"
    write(folder / "__init__.py", "")
    write(folder / "deep" / "hack.py", "import ctypes\n")
    assert read_submission(folder).review == ["pkg/deep/hack.py:1: ctypes"]
