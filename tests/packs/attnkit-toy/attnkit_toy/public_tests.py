"""Public tests: the peak attention weight of each query."""

import pytest
import torch

from exercises._expect import expect_close


@pytest.mark.exercise("peak_weight")
def test_peak_weight_of_uniform_and_one_hot_rows(solution, device):
    weights = torch.tensor([[0.25, 0.25, 0.25, 0.25], [0.0, 1.0, 0.0, 0.0], [0.5, 0.3, 0.2, 0.0]], device=device)
    expect_close(solution.peak_weight(weights), torch.tensor([0.25, 1.0, 0.5], device=device), "three rows")
