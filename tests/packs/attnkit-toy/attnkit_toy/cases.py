"""The toy group's hidden cases."""

from grader.instructor.cases import Case, Maker


def hidden_cases(m: Maker) -> dict[str, list[Case]]:
    hook = "peak_weight"
    t, k = m.size(3, 8), m.size(9, 13)
    one_hot = m.weights(2, 4, 4) * 0
    one_hot[..., 2] = 1.0  # at 2, not 1: an argmax (2) must never pass for the peak (1)
    return {
        hook: [
            Case(hook, "2d", {"weights": m.weights(t, k)}, "2-D, Tq != Tk", what_zh="二维，Tq != Tk", meta=True),
            Case(hook, "4d-heads", {"weights": m.weights(2, 3, k, t)}, "4-D heads", what_zh="四维（多头）"),
            Case(hook, "one-hot", {"weights": one_hot}, "one-hot rows give 1", what_zh="独热行给出 1"),
        ]
    }
