"""Sections 8.7 and 8.9: random residual stacks against their expected growth (1 + alpha^2)^L and against dense
matrices, the pathwise gradient against torch autograd and closed forms, the score-function estimator."""

import math

import numpy as np
import pytest
import torch

from dlnotes.tricks.residual_reparam import pathwise_grad, residual_stack_norms, score_function_grad

from conftest import bad_input_test


def test_dense_stack_recomputed_by_hand():
    d, L, alpha = 6, 5, 0.7
    got = residual_stack_norms(d, L, alpha, dense=True, rng=3)
    rng = np.random.default_rng(3)
    y = rng.standard_normal(d)
    start, ratios = y @ y, [1.0]
    for _ in range(L):
        y = y + alpha * (rng.standard_normal((d, d)) / math.sqrt(d)) @ y
        ratios.append(y @ y / start)
    np.testing.assert_allclose(got[0], ratios, rtol=1e-12)


@pytest.mark.parametrize("dense", [False, True])
def test_mean_growth_is_one_plus_alpha_squared_to_the_L(dense):
    d, L, alpha, nets = 8, 6, 0.8, 3000
    ratios = residual_stack_norms(d, L, alpha, n_nets=nets, dense=dense, rng=4)
    expected = (1 + alpha**2) ** np.arange(L + 1)
    se = ratios.std(axis=0) / math.sqrt(nets)
    assert np.all(np.abs(ratios.mean(axis=0) - expected) <= 4 * se + 1e-12)


def test_vector_trick_and_dense_matrices_agree_in_distribution():
    from scipy import stats

    fast = residual_stack_norms(5, 4, 1.0, n_nets=2000, rng=5)[:, -1]
    dense = residual_stack_norms(5, 4, 1.0, n_nets=2000, dense=True, rng=6)[:, -1]
    assert stats.ks_2samp(np.log(fast), np.log(dense)).pvalue > 1e-4


def test_residual_block_jacobian_is_identity_plus_alpha_df():
    rng = np.random.default_rng(0)
    theta, y, alpha = torch.tensor(rng.normal(size=(5, 5))), torch.tensor(rng.normal(size=5)), 0.3
    J = torch.autograd.functional.jacobian(lambda v: v + alpha * torch.tanh(theta @ v), y)
    expected = torch.eye(5) + alpha * torch.diag(1 - torch.tanh(theta @ y) ** 2) @ theta
    torch.testing.assert_close(J, expected.double())


def test_pathwise_equals_autograd_with_the_same_noise():
    mu, sigma, n = 0.4, 1.3, 1000
    got = pathwise_grad(lambda z: np.cos(z) * z + np.sin(z), mu, sigma, n=n, rng=9)  # f = z sin z
    xi = torch.tensor(np.random.default_rng(9).standard_normal(n))
    m = torch.tensor(mu, dtype=torch.float64, requires_grad=True)
    v = torch.tensor(sigma**2, dtype=torch.float64, requires_grad=True)
    z = m + v.sqrt() * xi
    (z * torch.sin(z)).mean().backward()
    assert got.g_mu == pytest.approx(m.grad.item(), rel=1e-12)
    assert got.g_var == pytest.approx(v.grad.item(), rel=1e-12)


@pytest.mark.parametrize("estimator", ["pathwise", "score"])
def test_estimators_are_unbiased_for_z_to_the_fourth(estimator):
    mu, sigma = 1.0, 0.5
    if estimator == "pathwise":
        est = pathwise_grad(lambda z: 4 * z**3, mu, sigma, n=200_000, rng=1)
    else:
        est = score_function_grad(lambda z: z**4, mu, sigma, n=200_000, rng=1)
    assert abs(est.g_mu - (4 * mu**3 + 12 * mu * sigma**2)) < 4 * est.se_mu
    assert abs(est.g_var - 6 * (mu**2 + sigma**2)) < 4 * est.se_var


def test_standard_errors_match_the_spread_of_repeated_estimates():
    means = [pathwise_grad(np.tanh, 0.2, 1.0, n=500, rng=s).g_mu for s in range(300)]
    se = pathwise_grad(np.tanh, 0.2, 1.0, n=500, rng=0).se_mu
    assert np.std(means) == pytest.approx(se, rel=0.2)


BAD_INPUT = [
    (lambda: residual_stack_norms(0, 3, 1.0), ValueError, "d must be an int"),
    (lambda: residual_stack_norms(4, 0, 1.0), ValueError, "L must be an int"),
    (lambda: residual_stack_norms(4, 3, "1"), TypeError, "alpha must be a real number"),
    (lambda: residual_stack_norms(4, 3, 1.0, n_nets=0), ValueError, "n_nets"),
    (lambda: residual_stack_norms(4, 3, 1.0, dense=1), TypeError, "dense must be True or False"),
    (lambda: pathwise_grad(3.0, 0.0, 1.0), TypeError, "df must be callable"),
    (lambda: pathwise_grad(np.cos, 0.0, 0.0), ValueError, "sigma"),
    (lambda: pathwise_grad(np.cos, 0.0, 1.0, n=1), ValueError, "n must be an int"),
    (lambda: score_function_grad(np.cos, float("nan"), 1.0), ValueError, "mu must be a finite"),
    (lambda: score_function_grad(np.cos, 0.0, 1.0, rng=-1), TypeError, "rng must be"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
