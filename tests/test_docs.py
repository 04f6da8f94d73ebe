"""The README and docs/ say only what is true: short, linked, naming real commands and options, the code's numbers.

The README stays a newcomer's page (at most 200 lines); every relative link of README.md and docs/*.md reaches a
file; every ``attnkit <command> … --option`` written in code (a code span, an indented or fenced block) of the
README, the docs, the learner's README template or a command's ``--help`` names a command and options of the
click CLI (:data:`grader.cli.main`); the counts of catalogued mistakes and the lists of exercise groups are the
code's.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.hook_table import GROUPS
from grader.instructor.rubric import load_rubric
from solutions.mistakes import CATALOGUE, catalogue

KIT = Path(__file__).resolve().parent.parent
README = KIT / "README.md"
DOCS = sorted((KIT / "docs").glob("*.md"))
LEARNER_README = KIT / "grader" / "instructor" / "templates" / "learner_README.md.j2"
PAGES = [README, *DOCS]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def rel(path: Path) -> str:
    return str(path.relative_to(KIT))


def test_the_readme_is_short():
    lines = read(README).splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to docs/ (at most 200)"


def test_the_docs_pages_exist():
    names = {p.name for p in DOCS}
    for page in ("security", "contract", "instructors", "cluster", "gradescope", "mistakes", "development"):
        assert f"{page}.md" in names, page


LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(text: str) -> list[str]:
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_relative_link_reaches_a_file(page):
    broken = [t for t in relative_links(read(page)) if not (page.parent / t.split("#")[0]).exists()]
    assert broken == [], f"{rel(page)}: links to nothing: {broken}"


def test_the_readme_links_every_docs_page():
    linked = {(README.parent / t.split("#")[0]).resolve() for t in relative_links(read(README))}
    assert [rel(p) for p in DOCS if p.resolve() not in linked] == []


def code_of(text: str) -> list[str]:
    """Every piece of code in Markdown: inline code spans, indented block lines, fenced block lines."""
    pieces, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            pieces.append(line.split(" # ")[0])  # a shell comment is prose
        else:
            pieces += re.findall(r"`([^`]+)`", line)
    return pieces


COMMAND = re.compile(r"\battnkit\s+([a-z][a-z-]*)((?:\s+(?!attnkit\b)[^\s;|&]+)*)")


def commands_in(text: str) -> list[tuple[str, list[str]]]:
    """``(command, [--option, …])`` for each ``attnkit <command> …`` written in code."""
    found = []
    for piece in code_of(text):
        for name, rest in COMMAND.findall(piece):
            found.append((name, re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest)))
    return found


def options_of(command: click.Command) -> set[str]:
    ctx = click.Context(command)
    return {opt for param in command.get_params(ctx) for opt in (*param.opts, *param.secondary_opts)}


def wrong_commands(text: str) -> list[str]:
    wrong = []
    for name, options in commands_in(text):
        command = main.commands.get(name)
        if command is None:
            wrong.append(f"attnkit {name}: no such command")
            continue
        wrong += [f"attnkit {name} {o}: no such option" for o in options if o not in options_of(command)]
    return wrong


@pytest.mark.parametrize("page", [*PAGES, LEARNER_README], ids=rel)
def test_every_command_and_option_written_is_the_clis(page):
    assert wrong_commands(read(page)) == []


def test_the_check_catches_a_wrong_option():
    assert wrong_commands("    attnkit submit --name alice\n") == ["attnkit submit --name: no such option"]
    assert wrong_commands("run `attnkit grades --out x`") == ["attnkit grades: no such command"]
    assert wrong_commands("`attnkit grade class/ --seed 1 --lms canvas` # --nothing") == []


def test_the_pages_name_the_commands_they_are_about():
    said = {name for page in [*PAGES, LEARNER_README] for name, _ in commands_in(read(page))}
    assert set(main.commands) <= said, f"commands no page shows: {set(main.commands) - said}"


def test_a_learner_hands_in_with_student():
    assert "--student" in {o for name, opts in commands_in(read(README)) if name == "submit" for o in opts}
    assert "`--student YOUR_ID`" in read(LEARNER_README)


OVERRIDE = re.compile(r"\battnkit\s+override\s+(\S+)\s+(\S+)\s+(\S+)\s+--reason")


def override_examples() -> list[tuple[str, str, str]]:
    """``(student, exercise, points)`` of every ``attnkit override`` example: the pages' code and the command's help."""
    help_text = " ".join(CliRunner().invoke(main, ["override", "--help"], terminal_width=300).output.split())
    return [m.groups() for page in PAGES for piece in code_of(read(page)) for m in OVERRIDE.finditer(piece)] + [
        m.groups() for m in OVERRIDE.finditer(help_text)
    ]


def test_every_override_example_runs_under_the_packaged_rubric():
    """Its points lie within the exercise's points (a newcomer copies the example: an example refused is wrong)."""
    examples = override_examples()
    assert len(examples) >= 3, examples  # the README, instructors.md and the --help each give one
    rubric = load_rubric()
    wrong = [e for e in examples if e[1] not in rubric.points or not 0 <= float(e[2]) <= rubric.points[e[1]]]
    assert wrong == []
    assert OVERRIDE.search('attnkit override alice causal_mask 1.5 --reason "x"').groups()[2] == "1.5"  # seen


# --- the code's numbers and lists ---------------------------------------------------------------------------


def test_the_catalogue_counts_are_the_codes():
    text = " ".join(read(KIT / "docs" / "mistakes.md").split())
    chapter = re.search(r"the chapter's catalogue, (\d+) wrong implementations", text)
    everything = re.search(r"`attnkit audit` checks (\d+) catalogued mistakes", text)
    assert chapter and everything, "docs/mistakes.md no longer says both counts"
    assert int(chapter[1]) == len(CATALOGUE)
    assert int(everything[1]) == len(catalogue())


def test_no_page_states_another_count_of_mistakes():
    for page in PAGES:
        text = " ".join(read(page).split())
        for n in re.findall(r"catalogue of (\d+)", text):
            pytest.fail(f"{rel(page)}: 'catalogue of {n}': say the count where it is checked (docs/mistakes.md)")


def group_lists(text: str) -> list[list[str]]:
    """Every comma list of words starting with the first two groups (``scores, masking, …``)."""
    first, second = list(GROUPS)[:2]
    pattern = rf"\b{first},\s+{second}(?:,\s+(?:[a-z_]+))*"
    return [re.split(r",\s+", m) for m in re.findall(pattern, " ".join(text.split()))]


def check_help() -> str:
    result = CliRunner().invoke(main, ["check", "--help"])
    assert result.exit_code == 0
    return result.output


@pytest.mark.parametrize("source", [*PAGES, LEARNER_README, "attnkit check --help"], ids=str)
def test_every_list_of_groups_is_every_group(source):
    text = check_help() if isinstance(source, str) else read(source)
    for listed in group_lists(text):
        assert listed == list(GROUPS), f"{source}: groups {listed}, the code's are {list(GROUPS)}"


def test_check_help_lists_the_groups():
    assert group_lists(check_help()), "attnkit check --help no longer lists the groups"


def test_a_short_group_list_is_caught():
    assert group_lists("a group: scores, masking, dropout") == [["scores", "masking", "dropout"]]


def test_the_learners_table_has_a_row_per_group():
    text = read(KIT / "docs" / "learners.md")
    missing = [g for g in GROUPS if f"| `exercises/{g}.py` |" not in text]
    assert missing == [], f"docs/learners.md: no row for exercises/<group>.py of {missing}"


# --- the stubs' words -----------------------------------------------------------------------------------------

CODE_WORDS = re.compile(
    r"torch\.|\.view\b|\.contiguous|transpose\(|masked_fill|sqrt\(|exp\(|imshow|triu|tril|rand\(|\* keep"
)
"""What a line of the answer looks like: a stub says what to compute and why, never how to write it."""
STUBS = sorted(p for p in (KIT / "exercises").glob("[!_]*.py") if not p.name.startswith("test_"))


def _stub_texts(path: Path) -> list[str]:
    import ast

    return [
        "".join(str(c.value) for c in ast.walk(node.exc) if isinstance(c, ast.Constant) and isinstance(c.value, str))
        for node in ast.walk(ast.parse(read(path)))
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and getattr(node.exc.func, "id", "") ==
        "NotImplementedError"
    ]


@pytest.mark.parametrize("path", STUBS, ids=[p.stem for p in STUBS])
def test_a_stubs_not_implemented_text_says_what_to_compute_not_the_line_that_does(path):
    texts = _stub_texts(path)
    assert texts, f"{rel(path)}: no stub"
    assert [t for t in texts if CODE_WORDS.search(t)] == []


@pytest.mark.parametrize("folder", ["grader", "grader/instructor"])
def test_the_layout_names_every_module(folder):
    """docs/development.md's layout names each module of grader/ and grader/instructor/ (a newcomer found sixteen
    missing); grader/child/ is named as one folder."""
    text = read(KIT / "docs" / "development.md")
    modules = [p.stem for p in sorted((KIT / folder).glob("*.py")) if not p.stem.startswith("__")]
    missing = [m for m in modules if not re.search(rf"(?<![\w/]){m}(?!\w)", text)]
    assert len(modules) > 10 and missing == [], f"docs/development.md's layout does not name {missing}"
