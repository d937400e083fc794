"""PAC-Bayes, flat minima and the loss landscape (sections 9.4-9.5 of dlnotes.theory): the Gaussian KL against
torch.distributions, the McAllester-Maurer bound against its formula, the PAC-Bayes objective against its fixed
point on a quadratic (with a prior centred at 0 and elsewhere), the stochastic network's logits against torch, antithetic noise and SAM against closed forms, the second-order test, sharpness and gradient
descent against numpy's eigenvalues and iterates, Bezier paths, magnitude pruning and masked training."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from dlnotes import theory
from dlnotes.data import Split

from conftest import bad_input_test

rng = np.random.default_rng(95)


def quadratic(A, b=None):
    """L(theta) = theta^T A theta / 2 + b^T theta for a symmetric A (a torch function of a flat vector)."""
    A_t = torch.tensor(A)
    b_t = torch.zeros(len(A), dtype=torch.float64) if b is None else torch.tensor(b)
    return lambda theta: 0.5 * theta @ A_t @ theta + b_t @ theta


def random_psd(d, low=0.1, high=5.0):
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    lams = np.linspace(low, high, d)
    return Q @ np.diag(lams) @ Q.T, lams


# ----------------------------------------------------------------------------- 9.4 PAC-Bayes and flat minima


def test_kl_diag_gauss_matches_torch_distributions():
    from torch.distributions import Independent, Normal, kl_divergence

    mu_q, var_q = rng.normal(size=6), rng.uniform(0.1, 2.0, 6)
    mu_p, var_p = rng.normal(size=6), rng.uniform(0.1, 2.0, 6)

    def gauss(mu, var):
        return Independent(Normal(torch.tensor(mu), torch.tensor(np.sqrt(var))), 1)

    expected = kl_divergence(gauss(mu_q, var_q), gauss(mu_p, var_p)).item()
    assert abs(theory.kl_diag_gauss(mu_q, var_q, mu_p, var_p) - expected) < 1e-12
    # an isotropic prior given by numbers, the PAC-Bayes form, and KL(Q||Q) = 0
    lam = 0.7
    pac_form = np.sum(0.5 * np.log(lam / var_q) + (var_q + mu_q**2) / (2 * lam) - 0.5)
    assert abs(theory.kl_diag_gauss(mu_q, var_q, 0.0, lam) - pac_form) < 1e-12
    assert abs(theory.kl_diag_gauss(mu_q, var_q, mu_q, var_q)) < 1e-15
    assert theory.kl_diag_gauss(mu_q, var_q, mu_p, var_p) != pytest.approx(
        theory.kl_diag_gauss(mu_p, var_p, mu_q, var_q)
    )


def test_pac_bayes_bound_formula_and_monotonicity():
    emp, kl, n, delta = 0.1, 5.0, 500, 0.05
    direct = emp + math.sqrt((kl + math.log(2 * math.sqrt(n) / delta)) / (2 * n))
    assert theory.pac_bayes_bound(emp, kl, n, delta) == pytest.approx(direct, rel=1e-14)
    bounds_kl = [theory.pac_bayes_bound(emp, k, n, delta) for k in (0.0, 1.0, 10.0, 100.0)]
    bounds_n = [theory.pac_bayes_bound(emp, kl, m, delta) for m in (10, 100, 1000, 10_000)]
    bounds_delta = [theory.pac_bayes_bound(emp, kl, n, d) for d in (0.5, 0.1, 0.01, 0.001)]
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
    q = theory.fit_pac_bayes(
        lambda thetas: 0.5 * (a_t * thetas**2).sum(dim=1), np.ones(2), lam, n, delta, steps=500, lr=0.04,
        samples=256, rng=0,
    )  # fmt: skip
    kl = theory.kl_diag_gauss(q.theta, q.var, 0.0, lam)
    c = 1 / (2 * math.sqrt(2 * n * (kl + math.log(2 * math.sqrt(n) / delta))))
    assert np.all(np.abs(q.var * (a / c + 1 / lam) - 1) < 0.05)
    assert np.all(np.abs(q.theta) < 0.05) and q.objective.shape == (500,)


def test_fit_pac_bayes_pulls_the_mean_towards_the_prior_mean():
    """With P = N(m, lam I) the stationary mean of a quadratic loss sum_i a_i theta_i^2 / 2 solves
    a theta + c (theta - m) / lam = 0: theta = c m / (lam a + c), c the complexity term's derivative factor."""
    a, m = np.array([0.01, 5.0]), np.array([1.5, -2.0])
    a_t = torch.tensor(a)
    lam, n, delta = 2.0, 50, 0.1
    q = theory.fit_pac_bayes(
        lambda thetas: 0.5 * (a_t * thetas**2).sum(dim=1), np.zeros(2), lam, n, delta, prior_mean=m, steps=800,
        lr=0.04, samples=256, rng=0,
    )  # fmt: skip
    kl = theory.kl_diag_gauss(q.theta, q.var, m, lam)
    c = 1 / (2 * math.sqrt(2 * n * (kl + math.log(2 * math.sqrt(n) / delta))))
    assert q.theta == pytest.approx(c * m / (lam * a + c), rel=0.05, abs=0.01)
    assert np.all(np.abs(q.var * (a / c + 1 / lam) - 1) < 0.05)
    assert q.theta[0] > 0.3  # the flat coordinate follows the prior mean (with m = 0 it would stay at 0)


def test_mlp_logits_are_the_torch_network_of_each_row():
    X = torch.tensor(rng.normal(size=(9, 3)))
    hidden, thetas = 4, torch.tensor(rng.normal(size=(5, 4 * 5 + 1)))
    net = nn.Sequential(nn.Linear(3, hidden), nn.Tanh(), nn.Linear(hidden, 1)).double()
    expected = []
    for theta in thetas:
        torch.nn.utils.vector_to_parameters(theta, net.parameters())
        expected.append(net(X).squeeze(-1).detach())
    assert torch.allclose(theory.mlp_logits(thetas, X, hidden), torch.stack(expected), atol=1e-13)


def test_mlp_gibbs_error_counts_the_mistakes_of_every_draw():
    X, y, hidden = rng.normal(size=(20, 2)), rng.integers(0, 2, 20), 3
    thetas = rng.normal(size=(6, 3 * 4 + 1))
    logits = theory.mlp_logits(torch.tensor(thetas), torch.tensor(X), hidden).numpy()
    expected = np.mean([[float((z > 0) != label) for z, label in zip(row, y, strict=True)] for row in logits])
    assert theory.mlp_gibbs_error(X, y, thetas, hidden, chunk=4) == pytest.approx(expected, abs=1e-15)


def test_linear_gibbs_error_counts_the_mistakes_of_every_draw():
    X, y = rng.normal(size=(30, 3)), rng.integers(0, 2, 30)
    thetas = rng.normal(size=(7, 3))
    expected = np.mean(
        [[float((x @ th > 0) != label) for x, label in zip(X, y, strict=True)] for th in thetas]
    )
    assert theory.linear_gibbs_error(X, y, thetas, chunk=3) == pytest.approx(expected, abs=1e-15)


def test_lbfgs_minimise_solves_a_convex_quadratic():
    A, _ = random_psd(5)
    b = rng.normal(size=5)
    theta = theory.lbfgs_minimise(quadratic(A, b), torch.zeros(5, dtype=torch.float64))
    assert np.allclose(theta.numpy(), np.linalg.solve(A, -b), atol=1e-8)


def test_noisy_loss_increase_is_the_antithetic_mean_of_the_quadratic_form():
    A, _ = random_psd(4)
    b = rng.normal(size=4)
    theta = torch.tensor(rng.normal(size=4))
    s, pairs = 0.3, 500
    result = theory.noisy_loss_increase(quadratic(A, b), theta, s, pairs=pairs, rng=3)
    xi = np.random.default_rng(3).standard_normal((pairs, 4))  # the draws the function makes
    exact = 0.5 * s**2 * np.einsum("ki,ij,kj->k", xi, A, xi)  # (L(+) + L(-))/2 - L = s^2/2 xi^T A xi, exactly
    assert result.mean == pytest.approx(exact.mean(), rel=1e-12)
    assert result.sem == pytest.approx(exact.std(ddof=1) / math.sqrt(pairs), rel=1e-10)
    assert abs(result.mean - 0.5 * s**2 * np.trace(A)) < 5 * result.sem


def test_sam_update_ascends_then_descends():
    A, _ = random_psd(3)
    theta = rng.normal(size=3)
    eta, rho = 0.1, 0.05
    g = A @ theta
    expected = theta - eta * A @ (theta + rho * g / np.linalg.norm(g))
    assert np.allclose(theory.sam_update(lambda v: A @ v, theta, eta, rho), expected, atol=1e-14)
    # rho = 0 is a gradient step; a zero gradient gives no perturbation
    assert np.allclose(theory.sam_update(lambda v: A @ v, theta, eta, 0.0), theta - eta * g, atol=1e-14)
    assert np.array_equal(theory.sam_update(lambda v: np.zeros(3), theta, eta, rho), theta)


# ----------------------------------------------------------------------------- 9.5 the loss landscape


def test_classify_critical_point_applies_the_second_order_test():
    Q = np.linalg.qr(rng.normal(size=(3, 3)))[0]

    def rotated(lams):
        return Q @ np.diag(lams) @ Q.T

    assert theory.classify_critical_point(rotated([1.0, 2.0, 3.0])) == "strict minimum"
    assert theory.classify_critical_point(rotated([-1.0, -2.0, -0.5])) == "strict maximum"
    assert theory.classify_critical_point(rotated([-1.0, 2.0, 3.0])) == "saddle"
    assert theory.classify_critical_point(rotated([0.0, 2.0, 3.0])) == "inconclusive"
    assert theory.classify_critical_point(rotated([0.0, -2.0, 3.0])) == "saddle"  # singular, but indefinite
    assert theory.classify_critical_point(torch.tensor(rotated([1e-12, 1.0, 2.0]))) == "inconclusive"
    assert theory.classify_critical_point(rotated([1e-12, 1.0, 2.0]), tol=1e-14) == "strict minimum"


def test_sharpness_matches_eigvalsh_and_warm_starts():
    A, lams = random_psd(8, high=10.0)
    loss = quadratic(A)
    theta = torch.tensor(rng.normal(size=8))
    result = theory.sharpness(loss, theta, iters=400, rng=0)
    assert result.value == pytest.approx(np.linalg.eigvalsh(A)[-1], rel=1e-8)
    top = torch.tensor(np.linalg.eigh(A)[1][:, -1])
    assert theory.sharpness(loss, theta, iters=1, v0=top).value == pytest.approx(lams[-1], rel=1e-12)


def test_tanh_mlp_mse_matches_autograd():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1)).double()
    f, theta0 = theory.flat_function(model)
    X, y = rng.normal(size=(11, 3)), rng.normal(size=11)
    theta = theta0.clone().requires_grad_(True)
    loss = 0.5 * ((f(theta, torch.tensor(X)).squeeze(-1) - torch.tensor(y)) ** 2).mean()
    loss.backward()
    ours = theory.tanh_mlp_mse(theta0.numpy(), X, y)
    assert ours.loss == pytest.approx(loss.item(), rel=1e-13)
    assert np.allclose(ours.grad, theta.grad.numpy(), atol=1e-14)


def test_gd_sharpness_follows_gradient_descent_on_a_quadratic():
    A, lams = random_psd(4, high=3.0)
    theta0, eta = rng.normal(size=4), 0.2
    run = theory.gd_sharpness(
        lambda th: theory.LossGrad(0.5 * th @ A @ th, A @ th), quadratic(A), theta0, eta, 30, every=10, rng=0
    )
    expected = np.linalg.matrix_power(np.eye(4) - eta * A, 30) @ theta0
    assert np.allclose(run.theta, expected, atol=1e-12)
    assert run.losses.shape == (30,) and list(run.measured_at) == [10, 20, 30]
    assert np.allclose(run.sharpness, lams[-1], rtol=1e-3)  # H = A everywhere; warm starts keep converging


def test_bezier_point_ends_midpoint_and_line():
    a, m, b = rng.normal(size=(3, 5))
    assert np.allclose(theory.bezier_point(a, m, b, 0.0), a) and np.allclose(
        theory.bezier_point(a, m, b, 1.0), b
    )
    assert np.allclose(theory.bezier_point(a, m, b, 0.5), (a + 2 * m + b) / 4)
    ts = np.linspace(0, 1, 7)
    line = theory.bezier_point(a, (a + b) / 2, b, ts)
    assert line.shape == (7, 5) and np.allclose(line, (1 - ts[:, None]) * a + ts[:, None] * b)
    as_tensor = theory.bezier_point(*(torch.tensor(v) for v in (a, m, b)), torch.tensor(ts))
    assert isinstance(as_tensor, torch.Tensor) and np.allclose(
        as_tensor.numpy(), theory.bezier_point(a, m, b, ts)
    )


def test_path_losses_and_fit_bezier_on_a_ring_valley():
    def ring(theta):  # zero loss on the unit circle
        return (theta @ theta - 1) ** 2

    theta_a, theta_b = (
        torch.tensor([1.0, 0.0], dtype=torch.float64),
        torch.tensor([0.0, 1.0], dtype=torch.float64),
    )
    line = theory.path_losses(ring, theta_a, theta_b, points=5)
    ts = np.linspace(0, 1, 5)
    assert np.allclose(line.loss, ((1 - ts) ** 2 + ts**2 - 1) ** 2) and line.barrier == pytest.approx(0.25)
    theta_m = theory.fit_bezier(ring, theta_a, theta_b, steps=300, lr=0.02, rng=0)
    curve = theory.path_losses(ring, theta_a, theta_b, theta_m)
    assert curve.loss.max() < 0.05 < line.loss.max()


def test_magnitude_mask_and_prune_keep_the_largest_weights():
    w = rng.normal(size=(20, 7))
    for frac in (0.0, 0.3, 0.8, 0.95, 1.0):
        mask = theory.magnitude_mask(w, frac)
        pruned = mask == 0
        assert pruned.sum() == round(frac * w.size) and mask.shape == w.shape
        if 0 < pruned.sum() < w.size:
            assert np.abs(w[~pruned]).min() >= np.abs(w[pruned]).max()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 9), nn.ReLU(), nn.Linear(9, 4))
    masks = theory.magnitude_prune(model, 0.8)
    assert sorted(masks) == ["0.weight", "2.weight"]  # weight matrices only, no biases
    for name, mask in masks.items():
        weight = dict(model.named_parameters())[name]
        assert int((mask == 0).sum()) == round(0.8 * weight.numel())
        assert torch.equal(
            mask, torch.as_tensor(theory.magnitude_mask(weight.detach(), 0.8), dtype=mask.dtype)
        )


def test_train_masked_keeps_pruned_weights_at_zero():
    torch.manual_seed(0)
    X, y = rng.normal(size=(60, 6)), rng.integers(0, 3, 60)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
    masks = theory.magnitude_prune(model, 0.5)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    history = theory.train_masked(model, masks, X, y, epochs=20, lr=0.1, batch_size=16, rng=0)
    assert history.shape == (20,) and history[-1] < history[0]
    for name, p in model.named_parameters():
        if name in masks:
            assert torch.all(p[masks[name] == 0] == 0)
            assert not torch.equal(p[masks[name] == 1], before[name][masks[name] == 1])


def test_train_binary_classifier_and_lottery_trial_run():
    torch.manual_seed(0)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] > 0).astype(int)
    history = theory.train_binary_classifier(nn.Sequential(nn.Linear(2, 1)), X, y, steps=50, lr=0.1)
    assert history.shape == (50,) and history[-1] < 0.5 * history[0]
    X_all, y_all = rng.normal(size=(120, 64)), rng.integers(0, 10, 120)
    split = Split(X_all[:80], X_all[80:], y_all[:80], y_all[80:])
    trial = theory.lottery_ticket_trial(split, (0.5, 0.9), hidden=8, epochs=1, rng=0)
    assert 0 <= trial.dense <= 1 and trial.ticket.shape == trial.fresh.shape == (2,)


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: theory.kl_diag_gauss(np.zeros(2), np.ones(3), 0.0, 1.0), ValueError, "var_q must have shape (2,)"),
    (lambda: theory.kl_diag_gauss(np.zeros(2), -np.ones(2), 0.0, 1.0), ValueError, "var_q must hold variances > 0"),
    (lambda: theory.kl_diag_gauss(np.zeros(2), np.ones(2), 0.0, 0.0), ValueError, "var_p must be a finite number"),
    (lambda: theory.pac_bayes_bound(1.5, 1.0, 100, 0.05), ValueError, "emp_risk must be a finite number in [0, 1]"),
    (lambda: theory.pac_bayes_bound(0.1, -1.0, 100, 0.05), ValueError, "kl must be a finite number"),
    (lambda: theory.pac_bayes_bound(0.1, 1.0, 5, 0.05), ValueError, "n must be an int in [8, inf)"),
    (lambda: theory.pac_bayes_bound(0.1, 1.0, 100, 1.0), ValueError, "delta must be a finite number in (0, 1)"),
    (lambda: theory.fit_pac_bayes(lambda t: t.sum(), np.zeros(2), 1.0, 100, 0.05, steps=2), ValueError, "loss must map a tensor"),
    (lambda: theory.fit_pac_bayes(lambda t: t, np.zeros(2), 0.0, 100, 0.05), ValueError, "lam must be a finite number"),
    (lambda: theory.fit_pac_bayes(lambda t: t, np.zeros(2), 1.0, 100, 0.05, prior_mean=np.zeros(3)), ValueError, "prior_mean must have shape (2,)"),
    (lambda: theory.mlp_logits(torch.ones(2, 9), np.ones((3, 2)), 2), TypeError, "X must be a 2-D torch tensor (n, d)"),
    (lambda: theory.mlp_logits(torch.ones(2, 8), torch.ones(3, 2), 2), ValueError, "thetas must be a torch tensor (S, 9)"),
    (lambda: theory.mlp_gibbs_error(np.ones((3, 2)), [0, 1, 1], np.ones((4, 8)), 2), ValueError, "thetas must have shape (any, 9)"),
    (lambda: theory.linear_gibbs_error(np.ones((3, 2)), [0, 1, 2], np.ones((4, 2))), ValueError, "y must hold labels in [0, 1]"),
    (lambda: theory.linear_gibbs_error(np.ones((3, 2)), [0, 1, 1], np.ones((4, 3))), ValueError, "thetas must have shape (any, 2)"),
    (lambda: theory.lbfgs_minimise(torch.sum, np.zeros(2)), TypeError, "theta0 must be a non-empty 1-D torch tensor"),
    (lambda: theory.noisy_loss_increase(torch.sum, torch.zeros(2), 0.0), ValueError, "s must be a finite number"),
    (lambda: theory.sam_update(lambda v: v[:1], np.zeros(2), 0.1, 0.1), ValueError, "grad must return a vector of the shape of theta"),
    (lambda: theory.classify_critical_point(np.ones((2, 3))), ValueError, "H must be a symmetric square matrix"),
    (lambda: theory.classify_critical_point(np.array([[0.0, 1.0], [0.0, 0.0]])), ValueError, "H must be a symmetric"),
    (lambda: theory.sharpness(torch.sum, torch.zeros(3), v0=torch.zeros(2)), ValueError, "v0 must have the shape of theta"),
    (lambda: theory.tanh_mlp_mse(np.zeros(10), np.ones((4, 2)), np.ones(4)), ValueError, "theta must have m (d + 2) + 1 entries"),
    (lambda: theory.gd_sharpness(lambda t: t, torch.sum, np.zeros(2), 0.1, 0), ValueError, "steps must be an int in [1, inf)"),
    (lambda: theory.bezier_point(np.zeros(2), np.zeros(3), np.zeros(2), 0.5), ValueError, "must have one shape"),
    (lambda: theory.bezier_point(np.zeros(2), np.zeros(2), np.zeros(2), 1.5), ValueError, "t must be a number or a vector (T,) in [0, 1]"),
    (lambda: theory.path_losses(torch.sum, torch.zeros(2), torch.zeros(2), points=1), ValueError, "points must be an int in [2, inf)"),
    (lambda: theory.fit_bezier(torch.sum, torch.zeros(2), torch.zeros(3)), ValueError, "theta_a and theta_b must have one shape"),
    (lambda: theory.magnitude_mask(np.ones(4), 1.2), ValueError, "frac must be a finite number in [0, 1]"),
    (lambda: theory.magnitude_prune(np.ones((2, 2)), 0.5), TypeError, "model must be a torch.nn.Module"),
    (lambda: theory.train_masked(nn.Linear(2, 2), {"bias": torch.ones(3)}, np.ones((4, 2)), [0, 1, 0, 1], epochs=1, lr=0.1), ValueError, "masks must map parameter names"),
    (lambda: theory.train_binary_classifier(nn.Linear(2, 1), np.ones((4, 2)), [0, 1, 2, 1]), ValueError, "y must hold labels in [0, 1]"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
