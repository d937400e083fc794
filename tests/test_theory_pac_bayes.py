"""Section 9.4 continued (dlnotes.theory.pac_bayes): the Gaussian KL against torch.distributions, the
McAllester-Maurer bound against its formula, the PAC-Bayes objective against its fixed point on a quadratic (with a
prior centred at 0 and elsewhere), the Gibbs errors against a count of every mistake, antithetic noise and SAM
against closed forms."""

import math

import numpy as np
import pytest
import torch

from dlnotes.theory import common, pac_bayes

from conftest import bad_input_test
from test_theory_common import quadratic, random_psd

rng = np.random.default_rng(95)


def test_kl_diag_gauss_matches_torch_distributions():
    from torch.distributions import Independent, Normal, kl_divergence

    mu_q, var_q = rng.normal(size=6), rng.uniform(0.1, 2.0, 6)
    mu_p, var_p = rng.normal(size=6), rng.uniform(0.1, 2.0, 6)

    def gauss(mu, var):
        return Independent(Normal(torch.tensor(mu), torch.tensor(np.sqrt(var))), 1)

    expected = kl_divergence(gauss(mu_q, var_q), gauss(mu_p, var_p)).item()
    assert abs(pac_bayes.kl_diag_gauss(mu_q, var_q, mu_p, var_p) - expected) < 1e-12
    # an isotropic prior given by numbers, the PAC-Bayes form, and KL(Q||Q) = 0
    lam = 0.7
    pac_form = np.sum(0.5 * np.log(lam / var_q) + (var_q + mu_q**2) / (2 * lam) - 0.5)
    assert abs(pac_bayes.kl_diag_gauss(mu_q, var_q, 0.0, lam) - pac_form) < 1e-12
    assert abs(pac_bayes.kl_diag_gauss(mu_q, var_q, mu_q, var_q)) < 1e-15
    assert pac_bayes.kl_diag_gauss(mu_q, var_q, mu_p, var_p) != pytest.approx(
        pac_bayes.kl_diag_gauss(mu_p, var_p, mu_q, var_q)
    )


def test_pac_bayes_bound_formula_and_monotonicity():
    emp, kl, n, delta = 0.1, 5.0, 500, 0.05
    direct = emp + math.sqrt((kl + math.log(2 * math.sqrt(n) / delta)) / (2 * n))
    assert pac_bayes.pac_bayes_bound(emp, kl, n, delta) == pytest.approx(direct, rel=1e-14)
    bounds_kl = [pac_bayes.pac_bayes_bound(emp, k, n, delta) for k in (0.0, 1.0, 10.0, 100.0)]
    bounds_n = [pac_bayes.pac_bayes_bound(emp, kl, m, delta) for m in (10, 100, 1000, 10_000)]
    bounds_delta = [pac_bayes.pac_bayes_bound(emp, kl, n, d) for d in (0.5, 0.1, 0.01, 0.001)]
    assert (
        np.all(np.diff(bounds_kl) > 0) and np.all(np.diff(bounds_n) < 0) and np.all(np.diff(bounds_delta) > 0)
    )
    # the looser form of two lecture sheets is exactly twice the complexity term
    looser = math.sqrt(2 / n * (kl + math.log(2 * math.sqrt(n) / delta)))
    assert looser == pytest.approx(2 * (direct - emp), rel=1e-14)


def test_fit_pac_bayes_reaches_the_fixed_point_of_a_quadratic():
    a = np.array([0.2, 5.0])
    a_t = torch.tensor(a)
    lam, n, delta = 2.0, 50, 0.1
    q = pac_bayes.fit_pac_bayes(
        lambda thetas: 0.5 * (a_t * thetas**2).sum(dim=1), np.ones(2), lam, n, delta, steps=500, lr=0.04,
        samples=256, rng=0,
    )  # fmt: skip
    kl = pac_bayes.kl_diag_gauss(q.theta, q.var, 0.0, lam)
    c = 1 / (2 * math.sqrt(2 * n * (kl + math.log(2 * math.sqrt(n) / delta))))
    assert np.all(np.abs(q.var * (a / c + 1 / lam) - 1) < 0.05)
    assert np.all(np.abs(q.theta) < 0.05) and q.objective.shape == (500,)


def test_fit_pac_bayes_pulls_the_mean_towards_the_prior_mean():
    """With P = N(m, lam I) the stationary mean of a quadratic loss sum_i a_i theta_i^2 / 2 solves
    a theta + c (theta - m) / lam = 0: theta = c m / (lam a + c), c the complexity term's derivative factor."""
    a, m = np.array([0.01, 5.0]), np.array([1.5, -2.0])
    a_t = torch.tensor(a)
    lam, n, delta = 2.0, 50, 0.1
    q = pac_bayes.fit_pac_bayes(
        lambda thetas: 0.5 * (a_t * thetas**2).sum(dim=1), np.zeros(2), lam, n, delta, prior_mean=m, steps=800,
        lr=0.04, samples=256, rng=0,
    )  # fmt: skip
    kl = pac_bayes.kl_diag_gauss(q.theta, q.var, m, lam)
    c = 1 / (2 * math.sqrt(2 * n * (kl + math.log(2 * math.sqrt(n) / delta))))
    assert q.theta == pytest.approx(c * m / (lam * a + c), rel=0.05, abs=0.01)
    assert np.all(np.abs(q.var * (a / c + 1 / lam) - 1) < 0.05)
    assert q.theta[0] > 0.3  # the flat coordinate follows the prior mean (with m = 0 it would stay at 0)


def test_mlp_gibbs_error_counts_the_mistakes_of_every_draw():
    X, y, hidden = rng.normal(size=(20, 2)), rng.integers(0, 2, 20), 3
    thetas = rng.normal(size=(6, 3 * 4 + 1))
    logits = common.tanh_mlp(X, thetas, hidden)
    expected = np.mean([[float((z > 0) != label) for z, label in zip(row, y, strict=True)] for row in logits])
    assert pac_bayes.mlp_gibbs_error(X, y, thetas, hidden, chunk=4) == pytest.approx(expected, abs=1e-15)


def test_linear_gibbs_error_counts_the_mistakes_of_every_draw():
    X, y = rng.normal(size=(30, 3)), rng.integers(0, 2, 30)
    thetas = rng.normal(size=(7, 3))
    expected = np.mean(
        [[float((x @ th > 0) != label) for x, label in zip(X, y, strict=True)] for th in thetas]
    )
    assert pac_bayes.linear_gibbs_error(X, y, thetas, chunk=3) == pytest.approx(expected, abs=1e-15)


def test_noisy_loss_increase_is_the_antithetic_mean_of_the_quadratic_form():
    A, _ = random_psd(rng, 4)
    b = rng.normal(size=4)
    theta = torch.tensor(rng.normal(size=4))
    s, pairs = 0.3, 500
    result = pac_bayes.noisy_loss_increase(quadratic(A, b), theta, s, pairs=pairs, rng=3)
    xi = np.random.default_rng(3).standard_normal((pairs, 4))  # the draws the function makes
    exact = 0.5 * s**2 * np.einsum("ki,ij,kj->k", xi, A, xi)  # (L(+) + L(-))/2 - L = s^2/2 xi^T A xi, exactly
    assert result.mean == pytest.approx(exact.mean(), rel=1e-12)
    assert result.sem == pytest.approx(exact.std(ddof=1) / math.sqrt(pairs), rel=1e-10)
    assert abs(result.mean - 0.5 * s**2 * np.trace(A)) < 5 * result.sem


def test_sam_update_ascends_then_descends():
    A, _ = random_psd(rng, 3)
    theta = rng.normal(size=3)
    eta, rho = 0.1, 0.05
    g = A @ theta
    expected = theta - eta * A @ (theta + rho * g / np.linalg.norm(g))
    assert np.allclose(pac_bayes.sam_update(lambda v: A @ v, theta, eta, rho), expected, atol=1e-14)
    # rho = 0 is a gradient step; a zero gradient gives no perturbation
    assert np.allclose(pac_bayes.sam_update(lambda v: A @ v, theta, eta, 0.0), theta - eta * g, atol=1e-14)
    assert np.array_equal(pac_bayes.sam_update(lambda v: np.zeros(3), theta, eta, rho), theta)


# ----------------------------------------------------------------------------- bad input


def test_binary_kl_matches_scipy_entropy():
    from scipy.stats import entropy

    for q, p in ((0.1, 0.3), (0.0, 0.2), (1.0, 0.6), (0.4, 0.4)):
        assert abs(pac_bayes.binary_kl(q, p) - entropy([q, 1 - q], [p, 1 - p])) < 1e-14
    assert pac_bayes.binary_kl(0.2, 0.0) == math.inf and pac_bayes.binary_kl(0.0, 0.0) == 0.0


@pytest.mark.parametrize(("q", "c"), [(0.0, 0.01), (0.05, 0.02), (0.3, 0.1), (0.9, 1.0), (0.2, 0.0)])
def test_kl_inverse_matches_a_brute_force_grid(q, c):
    """The bisection against the largest p on a grid of 10^6 points with kl(q||p) <= c (the grid's spacing 1e-6),
    and kl(q||p*) = c where the inverse is below 1."""
    grid = np.linspace(q, 1, 10**6 + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_grid = np.nan_to_num(q * np.log(q / grid), nan=0.0) + np.nan_to_num(
            (1 - q) * np.log((1 - q) / (1 - grid)), nan=0.0, posinf=np.inf
        )
    brute = grid[kl_grid <= c + 1e-15].max()
    p_star = pac_bayes.kl_inverse(q, c)
    assert brute - 1e-12 <= p_star <= brute + (1 - q) * 1e-6 + 1e-12
    if p_star < 1 - 1e-9:
        assert abs(pac_bayes.binary_kl(q, p_star) - c) < 1e-8


def test_pac_bayes_kl_bound_lies_between_the_truth_and_mcallester():
    """kl(q||p) >= 2(p - q)^2 (Pinsker), so the kl bound never exceeds McAllester-Maurer's, and is far tighter at
    small training errors; Catoni's bound against its formula, and above the training error."""
    for emp, kl in ((0.0, 5.0), (0.02, 20.0), (0.3, 2.0), (0.1, 200.0)):
        kl_bound = pac_bayes.pac_bayes_kl_bound(emp, kl, 1000, 0.05)
        assert emp <= kl_bound <= pac_bayes.pac_bayes_bound(emp, kl, 1000, 0.05) + 1e-12
        c = (kl + math.log(2 * math.sqrt(1000) / 0.05)) / 1000
        assert abs(pac_bayes.binary_kl(emp, kl_bound) - c) < 1e-8
    assert pac_bayes.pac_bayes_kl_bound(0.0, 5.0, 1000, 0.05) < 0.5 * pac_bayes.pac_bayes_bound(
        0.0, 5.0, 1000, 0.05
    )
    emp, kl, n, delta, C = 0.1, 10.0, 500, 0.05, 2.0
    expected = (1 - math.exp(-C * emp - (kl + math.log(1 / delta)) / n)) / (1 - math.exp(-C))
    assert abs(pac_bayes.catoni_bound(emp, kl, n, delta, C) - expected) < 1e-14
    assert pac_bayes.catoni_bound(emp, kl, n, delta, C) > emp


BAD_INPUT = [  # (call, error, message)
    (lambda: pac_bayes.binary_kl(1.2, 0.5), ValueError, "q must be a finite number in [0, 1]"),
    (lambda: pac_bayes.kl_inverse(0.1, -1.0), ValueError, "c must be a finite number"),
    (lambda: pac_bayes.pac_bayes_kl_bound(0.1, 1.0, 100, 0.0), ValueError, "delta must be a finite number in (0, 1)"),
    (lambda: pac_bayes.catoni_bound(0.1, 1.0, 100, 0.05, 0.0), ValueError, "C must be"),
    (lambda: pac_bayes.kl_diag_gauss(np.zeros(2), np.ones(3), 0.0, 1.0), ValueError, "var_q must have shape (2,)"),
    (lambda: pac_bayes.kl_diag_gauss(np.zeros(2), -np.ones(2), 0.0, 1.0), ValueError, "var_q must hold variances > 0"),
    (lambda: pac_bayes.kl_diag_gauss(np.zeros(2), np.ones(2), 0.0, 0.0), ValueError, "var_p must be a finite number"),
    (lambda: pac_bayes.pac_bayes_bound(1.5, 1.0, 100, 0.05), ValueError, "emp_risk must be a finite number in [0, 1]"),
    (lambda: pac_bayes.pac_bayes_bound(0.1, -1.0, 100, 0.05), ValueError, "kl must be a finite number"),
    (lambda: pac_bayes.pac_bayes_bound(0.1, 1.0, 5, 0.05), ValueError, "n must be an int in [8, inf)"),
    (lambda: pac_bayes.pac_bayes_bound(0.1, 1.0, 100, 1.0), ValueError, "delta must be a finite number in (0, 1)"),
    (lambda: pac_bayes.fit_pac_bayes(lambda t: t.sum(), np.zeros(2), 1.0, 100, 0.05, steps=2), ValueError, "loss must map a tensor"),
    (lambda: pac_bayes.fit_pac_bayes(lambda t: t, np.zeros(2), 0.0, 100, 0.05), ValueError, "lam must be a finite number"),
    (lambda: pac_bayes.fit_pac_bayes(lambda t: t, np.zeros(2), 1.0, 100, 0.05, prior_mean=np.zeros(3)), ValueError, "prior_mean must have shape (2,)"),
    (lambda: pac_bayes.mlp_gibbs_error(np.ones((3, 2)), [0, 1, 1], np.ones((4, 8)), 2), ValueError, "thetas must have shape (any, 9)"),
    (lambda: pac_bayes.linear_gibbs_error(np.ones((3, 2)), [0, 1, 2], np.ones((4, 2))), ValueError, "y must hold labels in [0, 1]"),
    (lambda: pac_bayes.linear_gibbs_error(np.ones((3, 2)), [0, 1, 1], np.ones((4, 3))), ValueError, "thetas must have shape (any, 2)"),
    (lambda: pac_bayes.noisy_loss_increase(torch.sum, torch.zeros(2), 0.0), ValueError, "s must be a finite number"),
    (lambda: pac_bayes.sam_update(lambda v: v[:1], np.zeros(2), 0.1, 0.1), ValueError, "grad must return a vector of the shape of theta"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
