"""Section 8.11 (the practitioner's toolkit): the learning-rate range test against a loop written out, temperature
scaling against a grid search and torch's cross-entropy, loss scaling in float16, averaged weights."""

import numpy as np
import pytest
import torch
from torch import nn

from dlnotes.tricks.toolkit import (
    Autocast,
    averaged_model,
    fit_temperature,
    half_precision_gradients,
    lr_range_test,
    tempered_nll,
)

from conftest import bad_input_test

rng = np.random.default_rng(0)
LOGITS = 3 * rng.normal(size=(200, 5))
LABELS = rng.integers(0, 5, size=200)


def _cross_entropy(model, batch):
    X, y = batch
    return nn.functional.cross_entropy(model(X), y)


def test_lr_range_test_grows_the_rate_exponentially_and_equals_a_loop_written_out():
    torch.manual_seed(0)
    X, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
    net = nn.Linear(4, 3)
    reference = nn.Linear(4, 3)
    reference.load_state_dict(net.state_dict())
    result = lr_range_test(net, _cross_entropy, torch.optim.SGD(net.parameters(), lr=0.5), [(X, y)] * 5, 5,
                           lr_min=1e-3, lr_max=1e1)  # fmt: skip
    np.testing.assert_allclose(result.lrs, np.logspace(-3, 1, 5), rtol=1e-12)
    losses = []
    for lr in result.lrs:
        loss = nn.functional.cross_entropy(reference(X), y)
        reference.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in reference.parameters():
                p -= lr * p.grad
        losses.append(loss.item())
    np.testing.assert_allclose(result.losses, losses, rtol=1e-5)


def test_tempered_nll_equals_torch_cross_entropy():
    for T in (0.5, 1.0, 3.0):
        expected = nn.functional.cross_entropy(torch.tensor(LOGITS / T), torch.tensor(LABELS)).item()
        assert tempered_nll(LOGITS, LABELS, T) == pytest.approx(expected, rel=1e-12)


def test_fit_temperature_finds_the_minimum_of_a_fine_grid():
    grid = np.exp(np.linspace(np.log(0.05), np.log(20), 4001))
    best = grid[np.argmin([tempered_nll(LOGITS, LABELS, T) for T in grid])]
    assert fit_temperature(LOGITS, LABELS) == pytest.approx(best, rel=2e-3)
    assert best > 1  # random labels: over-confident logits are softened


def test_loss_scaling_recovers_a_gradient_that_underflows_in_float16():
    w = torch.ones(3)
    # a float32 loss of float16 activations 1e-4 w: dE/dw = 1e-4 * 1e-4 = 1e-8 < 2^-24 in float16
    got = half_precision_gradients(lambda w: 1e-4 * (1e-4 * w).float().sum(), w)
    assert torch.equal(got.plain, torch.zeros(3))
    torch.testing.assert_close(got.scaled, torch.full((3,), 1e-8), rtol=1e-3, atol=0)
    big = half_precision_gradients(lambda w: 0.5 * w.float().sum(), w)
    torch.testing.assert_close(big.plain, big.scaled)
    # too large a scale overflows float16 (65504 at most): GradScaler then skips the step and lowers the scale
    assert torch.isinf(
        half_precision_gradients(lambda w: 0.5 * w.float().sum(), w, scale=2.0**18).scaled
    ).all()


def test_averaged_model_averages_every_parameter():
    torch.manual_seed(1)
    snapshots = [nn.Linear(3, 2) for _ in range(4)]
    average = averaged_model(snapshots)
    for name, param in average.named_parameters():
        expected = sum(dict(m.named_parameters())[name] for m in snapshots) / 4
        torch.testing.assert_close(param, expected)
    assert average is not snapshots[-1]


def test_autocast_computes_in_bfloat16_and_returns_float32():
    torch.manual_seed(2)
    net, x = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)), torch.randn(8, 16)
    out = Autocast(net)(x)
    full = net(x)
    assert out.dtype == torch.float32 and net[0].weight.dtype == torch.float32
    assert not torch.equal(out, full)  # the products were rounded to bfloat16's 8 bits of mantissa
    torch.testing.assert_close(out, full, rtol=0.05, atol=0.02)


BAD_INPUT = [  # (call, error, message)
    (
        lambda: lr_range_test(nn.Linear(2, 2), _cross_entropy, "sgd", [], 5),
        TypeError,
        "optimizer must be a torch optimizer",
    ),
    (
        lambda: lr_range_test(
            nn.Linear(2, 2), _cross_entropy, torch.optim.SGD(nn.Linear(2, 2).parameters()), [], 1
        ),
        ValueError,
        "steps",
    ),
    (
        lambda: lr_range_test(
            nn.Linear(2, 2), _cross_entropy, torch.optim.SGD(nn.Linear(2, 2).parameters()), [], 5, lr_max=1e-6
        ),
        ValueError,
        "lr_max",
    ),
    (lambda: tempered_nll(LOGITS, LABELS, 0.0), ValueError, "T"),
    (lambda: tempered_nll(LOGITS[0], LABELS, 1.0), ValueError, "logits must"),
    (lambda: fit_temperature(LOGITS, LABELS[:10]), ValueError, "y must"),
    (lambda: fit_temperature(LOGITS, LABELS, T_range=(2.0, 1.0)), ValueError, "T_range must be"),
    (lambda: half_precision_gradients(3.0, torch.ones(2)), TypeError, "loss_fn"),
    (lambda: half_precision_gradients(lambda w: w.sum(), torch.ones(2), scale=0.0), ValueError, "scale"),
    (lambda: averaged_model([]), TypeError, "models must be a non-empty list"),
    (lambda: Autocast("net"), TypeError, "model must be a torch module"),
    (lambda: Autocast(nn.Linear(2, 2), torch.float64), ValueError, "dtype must be"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
