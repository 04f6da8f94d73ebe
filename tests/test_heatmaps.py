"""Expected-vs-received heatmaps: drawn as PNG, written per student, embedded in feedback.html, shown by a browser.

The browser test renders a graded student's ``feedback.html`` in headless
Chromium (from the OS packages; skipped with the reason where none is
installed) and looks for the heatmap's viridis colours in the screenshot;
the same check on a page without a heatmap must find (next to) none.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from browser import dump_dom, screenshot

from grader.instructor import heatmaps
from grader.instructor.class_grading import GradeOptions, GradeRun, grade_class
from grader.instructor.gradebook import Gradebook
from grader.instructor.reports import write_reports
from grader.instructor.rubric import load_rubric

PIL_Image = pytest.importorskip("PIL.Image", reason="pillow comes with matplotlib (the plots extra)")
pytest.importorskip("matplotlib", reason="heatmaps need matplotlib (the plots extra)")

KIT = Path(__file__).resolve().parent.parent
SUBMISSIONS = KIT / "examples" / "submissions"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SEED = 11
INF = float("inf")


def _viridis(n: int = 64) -> np.ndarray:
    from matplotlib import colormaps

    return (np.asarray(colormaps["viridis"](np.linspace(0.0, 1.0, n)))[:, :3] * 255).round().astype(np.int16)


VIRIDIS = _viridis()
VIRIDIS_PURPLE = np.array([68, 1, 84], dtype=np.int16)  # viridis(0)


def viridis_pixels(image, tolerance: int = 18) -> int:
    """How many pixels lie within ``tolerance`` (per channel) of some viridis colour.

    Greys (text, borders, backgrounds) are left out first: viridis is saturated
    from end to end, so it never comes close to a grey.
    """
    rgb = np.asarray(image.convert("RGB")).reshape(-1, 3).astype(np.int16)
    coloured = rgb[(rgb.max(axis=1) - rgb.min(axis=1)) > 40]
    found = 0
    for start in range(0, len(coloured), 200_000):
        chunk = coloured[start : start + 200_000]
        distance = np.abs(chunk[:, None, :] - VIRIDIS[None, :, :]).max(axis=2).min(axis=1)
        found += int((distance <= tolerance).sum())
    return found


def open_png(data: bytes):
    image = PIL_Image.open(io.BytesIO(data))
    image.load()
    return image


# --- render ---------------------------------------------------------------------------------


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed))


def _masked_softmax(t: int) -> torch.Tensor:
    scores = _rand(t, t).masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), -INF)
    return torch.softmax(scores, -1)


RENDER_CASES = {
    "2d": (_rand(5, 5), _rand(5, 5, seed=1)),
    "3d": (_rand(2, 6, 6), _rand(2, 6, 6, seed=1)),
    "4d": (_rand(2, 3, 4, 4), _rand(2, 3, 4, 4, seed=1)),
    "minus-inf": (
        _rand(4, 4).masked_fill(torch.triu(torch.ones(4, 4, dtype=torch.bool), 1), -INF),
        _rand(4, 4, seed=1).masked_fill(torch.triu(torch.ones(4, 4, dtype=torch.bool), 0), -INF),
    ),
    "all-minus-inf": (torch.full((3, 3), -INF), torch.full((3, 3), -INF)),
    "plus-inf-and-nan": (_masked_softmax(4), torch.tensor([[INF, 0.0], [float("nan"), 1.0]])),
    "bool-mask": (
        torch.triu(torch.ones(5, 5, dtype=torch.bool), 1),
        torch.triu(torch.ones(5, 5, dtype=torch.bool), 0),
    ),
    "float64-and-float16": (_rand(4, 4).double(), _rand(4, 4, seed=1).half()),
    "shapes-differ": (_rand(6, 6), _rand(3, 6, 6, seed=1)),
    "1d": (_rand(7), _rand(7, seed=1)),
    "requires-grad": (_rand(3, 3).requires_grad_(), _rand(3, 3, seed=1).requires_grad_()),
}


@pytest.mark.parametrize(("expected", "received"), list(RENDER_CASES.values()), ids=list(RENDER_CASES))
def test_render_returns_a_png_with_a_viridis_heatmap(expected, received):
    data = heatmaps.render("softmax_weights: a case", expected, received)
    assert isinstance(data, bytes)
    assert data.startswith(PNG_MAGIC)
    image = open_png(data)
    assert image.format == "PNG"
    same_shape = heatmaps.first_matrix(expected).shape == heatmaps.first_matrix(received).shape
    panels = 3 if same_shape else 2  # expected, received and (same shapes) their difference
    assert image.size == (336 * panels, 304)  # 4.2 x 3.8 inches a panel at 80 dpi
    assert viridis_pixels(image) > 2_000, "no heatmap colours in the picture"


@pytest.mark.slow
def test_render_draws_the_first_matrix_of_a_batch():
    """A 3-D or 4-D case is drawn as its first (rows, cols) slice: the same picture as that slice's."""
    a, b = _rand(2, 3, 5, 5), _rand(2, 3, 5, 5, seed=1)
    four_d = heatmaps.render("t", a, b)
    assert four_d == heatmaps.render("t", a[0], b[0]) == heatmaps.render("t", a[0, 0], b[0, 0])
    assert four_d != heatmaps.render("t", a[1, 0], b[1, 0]), "the picture must depend on the values"


def test_render_leaves_its_inputs_alone():
    expected = _rand(2, 4, 4).masked_fill(torch.triu(torch.ones(4, 4, dtype=torch.bool), 1), -INF)
    received = _rand(2, 4, 4, seed=1)
    before = expected.clone(), received.clone()
    heatmaps.render("t", expected, received)
    assert torch.equal(expected, before[0]) and torch.equal(received, before[1])


@pytest.mark.parametrize(
    ("tensor", "shape"),
    [
        (torch.zeros(7), (1, 7)),
        (torch.zeros(3, 4), (3, 4)),
        (torch.zeros(2, 3, 4), (3, 4)),
        (torch.zeros(5, 2, 3, 4), (3, 4)),
    ],
    ids=["1d", "2d", "3d", "4d"],
)
def test_first_matrix(tensor, shape):
    assert tuple(heatmaps.first_matrix(tensor).shape) == shape


# --- draw and write ---------------------------------------------------------------------------------


def _figure(seed: int = 0) -> heatmaps.Figure:
    return heatmaps.Figure.of("3d-batched (cpu, float32)", _rand(2, 4, 4, seed=seed), _rand(2, 4, 4, seed=seed + 1))


def test_a_figure_keeps_the_first_matrix_on_the_cpu_and_owns_it():
    expected, received = _rand(2, 3, 4, 4), _rand(2, 3, 4, 4, seed=1).requires_grad_()
    figure = heatmaps.Figure.of("a case", expected, received)
    assert torch.equal(figure.expected, expected[0, 0]) and torch.equal(figure.received, received[0, 0].detach())
    assert figure.expected.untyped_storage().nbytes() == 4 * 4 * 4, "a figure must not hold the whole batch"
    expected[0, 0, 0, 0] = 7.0
    assert figure.expected[0, 0] != 7.0, "a figure shares no memory with what it was made from"


def test_draw_makes_one_png_per_hook_from_the_figures_data():
    drawn = heatmaps.draw({"softmax_weights": _figure(), "causal_mask": _figure(2)}, "bob")
    assert [(d.hook, d.file_name) for d in drawn] == [
        ("causal_mask", "heatmap-causal_mask.png"),
        ("softmax_weights", "heatmap-softmax_weights.png"),
    ]
    figure = _figure()
    assert drawn[1].png == heatmaps.render(f"softmax_weights: {figure.label}", figure.expected, figure.received)
    assert drawn[0].png != drawn[1].png and all(d.note == "" for d in drawn)


def test_write_writes_the_drawn_pngs(tmp_path):
    folder = tmp_path / "bob"
    drawn = heatmaps.draw({"softmax_weights": _figure(), "causal_mask": _figure(2)})
    assert heatmaps.write(folder, drawn) == ["heatmap-causal_mask.png", "heatmap-softmax_weights.png"]
    for heatmap in drawn:
        assert (folder / heatmap.file_name).read_bytes() == heatmap.png


def test_write_removes_a_stale_heatmap_from_an_earlier_grading(tmp_path):
    folder = tmp_path / "bob"
    folder.mkdir()
    (folder / "heatmap-causal_mask.png").write_bytes(b"stale")
    (folder / "heatmap-softmax_weights.png").write_bytes(b"stale too")
    (folder / "heatmap-dropout_scale.txt").write_text("heatmap not drawn: from an older attnkit")
    (folder / "feedback.md").write_text("kept")
    names = heatmaps.write(folder, heatmaps.draw({"softmax_weights": _figure()}))
    assert names == ["heatmap-softmax_weights.png"]
    assert sorted(p.name for p in folder.iterdir()) == ["feedback.md", "heatmap-softmax_weights.png"]
    assert (folder / "heatmap-softmax_weights.png").read_bytes().startswith(PNG_MAGIC), "not redrawn"
    assert (folder / "feedback.md").read_text() == "kept", "write touches heatmaps only"


def test_write_with_no_figures_removes_every_heatmap(tmp_path):
    folder = tmp_path / "alice"
    folder.mkdir()
    (folder / "heatmap-softmax_weights.png").write_bytes(b"stale")
    assert heatmaps.draw({}) == []
    assert heatmaps.write(folder, []) == []
    assert sorted(p.name for p in folder.iterdir()) == []
    assert heatmaps.write(tmp_path / "nobody", []) == []
    assert not (tmp_path / "nobody").exists()


def test_a_heatmap_that_cannot_be_drawn_is_left_out_and_says_why(tmp_path, monkeypatch, caplog):
    real = heatmaps.render

    def fails_for_masks(title, expected, received):
        if title.startswith("causal_mask"):
            raise ValueError("Axis limits cannot be NaN or Inf")
        return real(title, expected, received)

    monkeypatch.setattr(heatmaps, "render", fails_for_masks)
    drawn = heatmaps.draw({"softmax_weights": _figure(), "causal_mask": _figure(2)}, "mallory")
    assert [(d.hook, d.png is None, d.note) for d in drawn] == [
        ("causal_mask", True, "heatmap not drawn: ValueError: Axis limits cannot be NaN or Inf"),
        ("softmax_weights", False, ""),
    ]
    assert "heatmap of causal_mask for mallory not drawn" in caplog.text
    folder = tmp_path / "mallory"
    assert heatmaps.write(folder, drawn) == ["heatmap-softmax_weights.png"]
    assert sorted(p.name for p in folder.iterdir()) == ["heatmap-softmax_weights.png"]


def test_draw_never_raises_whatever_a_figure_holds():
    odd = heatmaps.Figure("x", torch.zeros(0, 3), torch.tensor([[float("nan")]]))
    broken = heatmaps.Figure("y", "not a tensor", None)  # type: ignore[arg-type]
    drawn = heatmaps.draw({"softmax_weights": odd, "causal_mask": broken})
    assert [d.hook for d in drawn] == ["causal_mask", "softmax_weights"]
    assert drawn[0].png is None and drawn[0].note.startswith("heatmap not drawn: ")


def test_write_raises_where_nothing_can_be_written(tmp_path):
    blocker = tmp_path / "alice"
    blocker.write_text("a file where the student's folder should be")
    with pytest.raises(OSError):
        heatmaps.write(blocker, heatmaps.draw({"softmax_weights": _figure()}))


# --- values a learner may send: extremes never stop a class ------------------------------------------------

BIG = 1.7e308
EXTREME_CASES = {
    "plus-minus-1.7e308": torch.tensor([[BIG, -BIG], [0.0, 1.0]], dtype=torch.float64),
    "all-1.7e308": torch.full((3, 3), BIG, dtype=torch.float64),
    "float32-max": torch.tensor([[3.4e38, -3.4e38], [1.0, 0.0]]),
    "inf-and-nan": torch.tensor([[INF, -INF], [float("nan"), 0.5]]),
    "all-nan": torch.full((4, 4), float("nan")),
    "subnormal": torch.tensor([[5e-324, 0.0], [0.0, 1e-320]], dtype=torch.float64),
}


@pytest.mark.parametrize("received", list(EXTREME_CASES.values()), ids=list(EXTREME_CASES))
def test_extreme_values_still_draw_a_heatmap(received):
    data = heatmaps.render("softmax_weights: extremes", _rand(*received.shape), received)
    image = open_png(data)
    assert image.size == (1008, 304)  # expected, received, difference
    assert viridis_pixels(image) > 2_000


@pytest.mark.parametrize(
    ("tensors", "expected"),
    [
        ((torch.tensor([BIG, -BIG, 0.0], dtype=torch.float64),), (-heatmaps.DRAWN_RANGE, heatmaps.DRAWN_RANGE, True)),
        ((torch.tensor([0.25, 0.75]), torch.tensor([INF, float("nan")])), (0.25, 0.75, False)),
        ((torch.full((2,), 3.0),), (2.5, 3.5, False)),
        ((torch.tensor([float("nan"), -INF]),), (0.0, 1.0, False)),
    ],
    ids=["clipped", "non-finite-ignored", "constant", "nothing-finite"],
)
def test_colour_range_is_finite_and_not_empty(tensors, expected):
    assert heatmaps.colour_range(*[t.double() for t in tensors]) == expected


# --- grading writes and embeds them ----------------------------------------------------------------


CLASS = [str(SUBMISSIONS / "bob"), str(SUBMISSIONS / "alice.py")]
OPTIONS = GradeOptions(seed=SEED, devices=["cpu", "meta"])


@pytest.fixture(scope="module")
def graded_run(tmp_path_factory) -> tuple[Path, GradeRun, list[str]]:
    """The class graded: ``out``, the run, the heatmap files in ``out`` before any report was written."""
    out = tmp_path_factory.mktemp("graded")
    run = grade_class(CLASS, out, OPTIONS)
    before_reports = sorted(str(p.relative_to(out)) for p in out.rglob("heatmap-*"))
    write_reports(out, run.graded, load_rubric(), run.report_options, run.figures)
    return out, run, before_reports


@pytest.fixture(scope="module")
def graded(graded_run) -> Path:
    return graded_run[0]


def _embedded_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'<img[^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


@pytest.mark.slow
def test_grading_bob_writes_a_softmax_heatmap(graded):
    heatmap_files = sorted(p.name for p in (graded / "bob").glob("heatmap-*.png"))
    assert heatmap_files == ["heatmap-softmax_weights.png"]
    data = (graded / "bob" / "heatmap-softmax_weights.png").read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert viridis_pixels(open_png(data)) > 2_000


@pytest.mark.slow
def test_bobs_feedback_html_embeds_the_heatmap(graded):
    page = (graded / "bob" / "feedback.html").read_text(encoding="utf-8")
    assert 'src="data:image/png;base64,' in page
    (embedded,) = _embedded_pngs(page)
    assert embedded == (graded / "bob" / "heatmap-softmax_weights.png").read_bytes()
    # under the softmax_weights section
    section = page.split('id="softmax_weights">', 1)[1].split("</section>", 1)[0]
    assert "data:image/png;base64," in section


@pytest.mark.slow
def test_bobs_feedback_md_links_the_heatmap(graded):
    text = (graded / "bob" / "feedback.md").read_text(encoding="utf-8")
    assert "(heatmap-softmax_weights.png)" in text


@pytest.mark.slow
def test_alice_gets_no_heatmap(graded):
    assert list((graded / "alice").glob("heatmap-*")) == []
    page = (graded / "alice" / "feedback.html").read_text(encoding="utf-8")
    assert "<img" not in page and "data:image/png" not in page
    assert "heatmap-" not in (graded / "alice" / "feedback.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_regrading_removes_a_heatmap_left_by_an_earlier_grading(graded, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(graded, out)
    (out / "bob" / "heatmap-causal_mask.png").write_bytes((out / "bob" / "heatmap-softmax_weights.png").read_bytes())
    (out / "alice" / "heatmap-split_heads.png").write_bytes(b"stale")
    run = grade_class(CLASS, out, dataclasses.replace(OPTIONS, force=True))
    write_reports(out, run.graded, load_rubric(), run.report_options, run.figures)
    assert sorted(p.name for p in (out / "bob").glob("heatmap-*.png")) == ["heatmap-softmax_weights.png"]
    assert list((out / "alice").glob("heatmap-*")) == []
    assert len(_embedded_pngs((out / "bob" / "feedback.html").read_text(encoding="utf-8"))) == 1
    assert "<img" not in (out / "alice" / "feedback.html").read_text(encoding="utf-8")


# --- the heatmaps travel as data: grading writes none, the report writer draws them ------------------


@pytest.mark.slow
def test_grading_writes_no_file_the_report_writer_draws_the_heatmaps(graded_run):
    out, run, before_reports = graded_run
    assert before_reports == [], "grading wrote heatmaps; they should reach the report writer as data"
    assert list(run.figures) == ["bob"] and list(run.figures["bob"]) == ["softmax_weights"]
    figure = run.figures["bob"]["softmax_weights"]
    assert figure.label.endswith("(cpu, float32)") or figure.label.endswith("(cpu, float64)")
    assert not torch.allclose(figure.received.double(), figure.expected.double(), atol=1e-3), "a passing case's figure"
    drawn = heatmaps.render(f"softmax_weights: {figure.label}", figure.expected, figure.received)
    assert (out / "bob" / "heatmap-softmax_weights.png").read_bytes() == drawn


@pytest.mark.slow
def test_the_gradebook_keeps_the_figures_so_a_rerun_draws_the_same_heatmaps(graded_run, tmp_path):
    out, run, _ = graded_run
    with Gradebook(out / "gradebook.sqlite") as book:
        kept = book.figures(run.run_id, "bob")
    original = run.figures["bob"]["softmax_weights"]
    assert list(kept) == ["softmax_weights"] and kept["softmax_weights"].label == original.label
    assert torch.equal(kept["softmax_weights"].expected, original.expected)
    assert torch.equal(kept["softmax_weights"].received, original.received)
    again_out = tmp_path / "again"
    shutil.copytree(out, again_out)
    for png in again_out.rglob("heatmap-*"):
        png.unlink()
    again = grade_class(CLASS, again_out, OPTIONS)  # everything reused: no learner process runs
    assert sorted(again.reused) == ["alice", "bob"]
    write_reports(again_out, again.graded, load_rubric(), again.report_options, again.figures)
    assert (again_out / "bob" / "heatmap-softmax_weights.png").read_bytes() == (
        out / "bob" / "heatmap-softmax_weights.png"
    ).read_bytes()
    assert len(_embedded_pngs((again_out / "bob" / "feedback.html").read_text(encoding="utf-8"))) == 1


# --- a real browser ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_chromium_renders_bobs_heatmap_and_not_alices(graded, tmp_path):
    bob = PIL_Image.open(screenshot(graded / "bob" / "feedback.html", tmp_path / "bob"))
    alice = PIL_Image.open(screenshot(graded / "alice" / "feedback.html", tmp_path / "alice"))
    assert bob.size[0] >= 1000 and alice.size[0] >= 1000
    on_bob, on_alice = viridis_pixels(bob), viridis_pixels(alice)
    # the picture is 640 x 288, about two thirds of it heatmap cells and colour bar
    assert on_bob > 20_000, f"only {on_bob} viridis pixels: the heatmap did not render"
    assert on_alice < 1_000, f"{on_alice} viridis pixels on a page without a heatmap: the colour check is too loose"
    purple = np.asarray(bob.convert("RGB")).reshape(-1, 3).astype(np.int16)
    near_purple = int((np.abs(purple - VIRIDIS_PURPLE).max(axis=1) <= 20).sum())
    assert near_purple > 500, "viridis' dark purple end (the near-zero weights) is missing"


@pytest.mark.slow
def test_chromium_dom_holds_the_embedded_image(graded, tmp_path):
    dom = dump_dom(graded / "bob" / "feedback.html", tmp_path / "dom")
    images = re.findall(r"<img\b[^>]*>", dom)
    assert len(images) == 1, images
    assert 'class="figure"' in images[0]
    assert 'src="data:image/png;base64,' in images[0]
    assert "<img" not in dump_dom(graded / "alice" / "feedback.html", tmp_path / "dom-alice")


@pytest.mark.slow  # a fresh interpreter imports torch and matplotlib
def test_matplotlib_says_nothing_on_the_console_about_a_figure_it_draws():
    """An empty matrix (a stub's output) or a cramped layout is drawn as well as it can be, with no warning line."""
    import subprocess
    import sys

    code = (
        "import torch\nfrom grader.instructor.heatmaps import render\n"
        "assert render('c', torch.rand(8, 8), torch.zeros(0)).startswith(b'\\x89PNG')\n"
        "assert render('c', torch.rand(8, 8) > 0.5, torch.zeros(8, 0, dtype=torch.bool)).startswith(b'\\x89PNG')\n"
        "import warnings\nwarnings.warn('still heard')\n"  # other warnings are not silenced
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "Warning" in line] == ["<string>:6: UserWarning: still heard"]
