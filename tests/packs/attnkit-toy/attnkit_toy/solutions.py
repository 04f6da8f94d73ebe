"""The toy group's reference and its known mistakes."""

from grader import hookimpl
from solutions.mistakes import Mistake


@hookimpl
def peak_weight(weights):
    return weights.amax(dim=-1)  # (..., Tq)


def peak_over_queries(weights):
    return weights.amax(dim=-2)


def peak_index(weights):
    return weights.argmax(dim=-1).to(weights.dtype)


CATALOGUE = (
    Mistake(
        "toy-peak-over-queries",
        "peak_weight",
        "the max over the queries (dim=-2), not over each query's keys",
        "Which dimension holds one query's weights? Take the max along that one.",
        "哪个维度存放一个查询的权重？沿着那个维度取最大值。",
        "classic",
        {"peak_weight": peak_over_queries},
    ),
    Mistake(
        "toy-peak-index",
        "peak_weight",
        "the position of the largest weight (argmax), not its value",
        "Do you return where the largest weight is, or how large it is?",
        "你返回的是最大权重所在的位置，还是它的大小？",
        "classic",
        {"peak_weight": peak_index},
    ),
)
