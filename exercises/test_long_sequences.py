"""Public tests: the sliding-window mask and chunked (online-softmax) attention."""

import math

import pytest
import torch

from exercises._expect import expect_close, expect_raises, expect_unchanged, f64, like, rand


def window_oracle(num_tokens, window):
    """mask[i, j] = (j > i) or (j <= i - window), written out with loops."""
    return torch.tensor(
        [[j > i or j <= i - window for j in range(num_tokens)] for i in range(num_tokens)], dtype=torch.bool
    )


@pytest.mark.exercise("sliding_window_mask")
def test_sliding_window_mask_worked_example(solution, device):
    # T = 4, window = 2: each token sees itself and the one before it, never the future
    expected = torch.tensor(
        [
            [False, True, True, True],
            [False, False, True, True],
            [True, False, False, True],
            [True, True, False, False],
        ],
        device=device,
    )
    expect_close(solution.sliding_window_mask(4, 2, device=device), expected, "T=4, window=2")


@pytest.mark.exercise("sliding_window_mask")
@pytest.mark.parametrize(
    "num_tokens, window",
    [(7, 3), (5, 1), (9, 4), (1, 2)],
    ids=["T=7-w=3", "T=5-w=1-only-itself", "T=9-w=4", "T=1"],
)
def test_sliding_window_mask(solution, num_tokens, window, device):
    got = solution.sliding_window_mask(num_tokens, window, device=device)
    expect_close(got, window_oracle(num_tokens, window).to(device), f"T={num_tokens}, window={window}")


@pytest.mark.exercise("sliding_window_mask")
@pytest.mark.parametrize("window", [5, 12], ids=["window=T", "window>T"])
def test_sliding_window_mask_covering_everything_is_causal(solution, window, device):
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1).to(device)  # the causal mask: only the future
    expect_close(solution.sliding_window_mask(5, window, device=device), causal, f"T=5, window={window}")


@pytest.mark.exercise("sliding_window_mask")
@pytest.mark.parametrize("num_tokens, window", [(5, 0), (0, 3)], ids=["window=0", "T=0"])
def test_sliding_window_mask_rejects_bad_sizes(solution, num_tokens, window, device):
    case = f"T={num_tokens}, window={window}"
    expect_raises(ValueError, case, solution.sliding_window_mask, num_tokens, window, device=device)


def attention_oracle(queries, keys, values, causal):
    """Full softmax attention in float64: every score at once, the future set to -inf, empty rows 0."""
    q, k, v = f64(queries), f64(keys), f64(values)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        num_queries, num_keys = scores.shape[-2], scores.shape[-1]
        for i in range(num_queries):  # query i is at position i + (Tk - Tq): it sees keys up to there
            scores[..., i, max(0, i + num_keys - num_queries + 1) :] = float("-inf")
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row with every key masked: zeros
    return weights @ v


@pytest.mark.exercise("chunked_attention")
def test_chunked_attention_worked_example(solution, dtype, device):
    # one query, four keys in two blocks of 2; q . k_j / sqrt(4) is the first entry of key j
    queries = torch.tensor([[2.0, 0.0, 0.0, 0.0]], dtype=dtype, device=device)  # (1, 4)
    keys = torch.zeros(4, 4, dtype=dtype, device=device)
    keys[2:, 0] = math.log(2.0)  # scores [0, 0, ln 2, ln 2]
    values = torch.tensor([[6.0], [0.0], [3.0], [0.0]], dtype=dtype, device=device)  # (4, 1)
    # block 1: m = 0, l = 1 + 1 = 2, acc = 6 + 0 = 6
    # block 2: m_new = ln 2, rescale exp(0 - ln 2) = 1/2: l = 2/2 + 1 + 1 = 3, acc = 6/2 + 3 + 0 = 6
    # answer: acc / l = 2 (without the rescale: 9 / 4 = 2.25)
    got = solution.chunked_attention(queries, keys, values, 2, causal=False)
    expect_close(got, torch.tensor([[2.0]], dtype=dtype, device=device), "worked example, two blocks")


# name: (queries shape, keys shape, dv, chunk_size, causal)
CHUNK_CASES = {
    "chunk 3 does not divide Tk=8": ((2, 5, 4), (2, 8, 4), 3, 3, False),
    "chunk 16 > Tk=7": ((2, 4, 3), (2, 7, 3), 5, 16, False),
    "chunk 1": ((3, 4), (5, 4), 2, 1, False),
    "causal Tq=Tk=9": ((2, 9, 4), (2, 9, 4), 3, 4, True),
    "causal 3 queries at the end of 8 keys": ((2, 3, 5), (2, 8, 5), 4, 3, True),
    "4-D heads": ((2, 3, 5, 4), (2, 3, 7, 4), 6, 2, False),
}


@pytest.mark.exercise("chunked_attention")
@pytest.mark.parametrize("case", CHUNK_CASES, ids=list(CHUNK_CASES))
def test_chunked_attention_equals_full_attention(solution, case, dtype, device):
    q_shape, k_shape, dv, chunk, causal = CHUNK_CASES[case]
    queries = rand(*q_shape, seed=21, dtype=dtype, device=device, low=-2.0, high=2.0)
    keys = rand(*k_shape, seed=22, dtype=dtype, device=device, low=-2.0, high=2.0)
    values = rand(*k_shape[:-1], dv, seed=23, dtype=dtype, device=device)
    before = [t.clone() for t in (queries, keys, values)]
    got = solution.chunked_attention(queries, keys, values, chunk, causal=causal)
    expect_close(got, like(attention_oracle(queries, keys, values, causal), queries), case)
    for name, tensor, snapshot in zip(("queries", "keys", "values"), (queries, keys, values), before, strict=True):
        expect_unchanged(tensor, snapshot, case, name)


@pytest.mark.exercise("chunked_attention")
def test_chunked_attention_query_without_keys_gives_zeros(solution, dtype, device):
    case = "causal, 6 queries and 4 keys: queries 0 and 1 see no key"
    queries = rand(6, 3, seed=24, dtype=dtype, device=device)
    keys = rand(4, 3, seed=25, dtype=dtype, device=device)
    values = rand(4, 2, seed=26, dtype=dtype, device=device)
    got = solution.chunked_attention(queries, keys, values, 3, causal=True)
    expect_close(got, like(attention_oracle(queries, keys, values, True), queries), case)
    expect_close(got[:2], torch.zeros(2, 2, dtype=dtype, device=device), case + ", the first two rows", atol=0, rtol=0)


@pytest.mark.exercise("chunked_attention")
def test_chunked_attention_very_negative_scores(solution, dtype, device):
    case = "every score below -100: the running max starts at -inf, not 0"
    queries = rand(2, 3, 4, seed=27, dtype=dtype, device=device, low=10.0, high=12.0)
    keys = rand(2, 9, 4, seed=28, dtype=dtype, device=device, low=-12.0, high=-10.0)
    values = rand(2, 9, 3, seed=29, dtype=dtype, device=device)
    got = solution.chunked_attention(queries, keys, values, 4, causal=False)
    expected = like(attention_oracle(queries, keys, values, False), queries)
    expect_close(got, expected, case, atol=1e-4, rtol=1e-4)  # scores in the hundreds keep fewer digits


@pytest.mark.exercise("chunked_attention")
def test_chunked_attention_long_sequence(solution, dtype, device):
    # T = 2048: `attnkit check` also measures the memory your call holds at once (never a whole (Tq, Tk) of scores)
    case = "Tq = Tk = 2048, d = 16, chunk_size 8, causal"
    queries = rand(2, 2048, 16, seed=30, dtype=dtype, device=device)
    keys = rand(2, 2048, 16, seed=31, dtype=dtype, device=device)
    values = rand(2, 2048, 12, seed=32, dtype=dtype, device=device)
    got = solution.chunked_attention(queries, keys, values, 8, causal=True)
    expect_close(got, like(attention_oracle(queries, keys, values, True), queries), case)
