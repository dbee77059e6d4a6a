"""GPU proof payload for pytest: one passing and one failing test, both launch kernels.

Proton 3.6's CLI exits 0 for this file; under aorta the trial must fail (exit code 1).
"""

import torch


def test_kernels_run():
    x = torch.randn(2048, 2048, device="cuda")
    assert (x @ x).isfinite().all().item()


def test_fails_on_purpose():
    torch.ones(4, device="cuda").sum().item()
    assert 1 == 2, "failing on purpose: the trial must be a failure"
