"""Section 9.2: the Gaussian likelihood and the energy against scipy's densities, importance weights against
scipy's softmax, grid quadrature against the closed-form Bayesian linear regression, the expected calibration
error against a hand count and a loop, the Metropolis-Hastings kernel against detailed balance, the samplers
(Metropolis-Hastings, HMC, SGLD) against the moments of known Gaussians, leapfrog and Euler against their
closed-form maps on a harmonic oscillator, the numpy tanh network and its energy gradient against torch."""

import numpy as np
import torch
from scipy import special, stats
from torch import nn

from dlnotes import theory

from conftest import bad_input_test

rng = np.random.default_rng(92)


def linear_problem(n=15, d=2, noise_var=0.3, prior_var=0.8):
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + np.sqrt(noise_var) * rng.normal(size=n)
    return X, y, noise_var, prior_var


def test_log_likelihood_and_energy_match_scipy_densities():
    X, y, noise_var, prior_var = linear_problem()
    thetas = rng.normal(size=(6, 2))
    predictions = thetas @ X.T
    constant = -0.5 * len(y) * np.log(2 * np.pi * noise_var)
    exact = stats.norm(predictions, np.sqrt(noise_var)).logpdf(y).sum(axis=1)
    assert np.allclose(theory.log_likelihood(y, predictions, noise_var) + constant, exact, atol=1e-10)
    assert isinstance(theory.log_likelihood(y, predictions[0], noise_var), float)
    # -log p(theta|S) = E(theta) + c: the difference to the exact Gaussian posterior is one constant
    posterior = theory.bayes_linreg(X, y, noise_var, prior_var * np.eye(2))
    log_post = stats.multivariate_normal(posterior.mean, posterior.cov).logpdf(thetas)
    c = log_post + theory.energy(y, predictions, thetas, noise_var, prior_var)
    assert np.ptp(c) < 1e-9
    # one prior variance per parameter: a diagonal prior covariance
    prior_vars = np.array([0.5, 2.0])
    diagonal = theory.bayes_linreg(X, y, noise_var, np.diag(prior_vars))
    c_diag = stats.multivariate_normal(diagonal.mean, diagonal.cov).logpdf(thetas) + theory.energy(
        y, predictions, thetas, noise_var, prior_vars
    )
    assert np.ptp(c_diag) < 1e-9


def test_importance_weights_are_a_stable_softmax_of_the_log_ratio():
    a, b = rng.normal(size=9) * 4, rng.normal(size=9)
    assert np.allclose(theory.importance_weights(a, b), special.softmax(a - b), atol=1e-15)
    assert np.allclose(theory.importance_weights(a), special.softmax(a), atol=1e-15)
    far = theory.importance_weights(a - 5000.0, b)  # exp(-5000) is 0 in float64; the weights are not
    assert np.allclose(far, special.softmax(a - b), atol=1e-15)


def test_importance_ensemble_on_a_grid_is_the_closed_form_predictive():
    X, y, noise_var, prior_var = linear_problem(n=12, d=1)
    grid = np.linspace(-6, 6, 3001)[:, None]
    x_new = np.array([-2.0, 0.5, 3.0])
    ensemble = theory.importance_ensemble(
        grid * x_new[None, :], -theory.energy(y, grid @ X.T, grid, noise_var, prior_var)
    )
    posterior = theory.bayes_linreg(X, y, noise_var, prior_var * np.eye(1))
    assert np.allclose(ensemble.mean, x_new * posterior.mean[0], atol=1e-10)
    assert np.allclose(ensemble.var, x_new**2 * posterior.cov[0, 0], atol=1e-10)
    assert np.isclose(ensemble.weights.sum(), 1.0) and 1 < ensemble.ess < len(grid)
    flat = theory.importance_ensemble(rng.normal(size=(50, 3)), np.zeros(50))
    assert np.isclose(flat.ess, 50.0)


def test_expected_calibration_error_against_a_hand_count_and_a_loop():
    # four predictions in 2 bins: (0, 0.5] holds confidences 0.4 (right) and 0.5 (wrong): |1/2 - 0.45| = 0.05;
    # (0.5, 1] holds 0.7 (right) and 0.9 (wrong): |1/2 - 0.8| = 0.3. ECE = 2/4 * 0.05 + 2/4 * 0.3 = 0.175
    probs = np.array([[0.4, 0.3, 0.3], [0.5, 0.5, 0.0], [0.1, 0.7, 0.2], [0.05, 0.05, 0.9]])
    y = np.array([0, 1, 1, 0])
    result = theory.expected_calibration_error(probs, y, bins=2)
    assert np.isclose(result.ece, 0.175) and result.counts.tolist() == [2, 2]
    assert np.allclose(result.confidence, [0.45, 0.8]) and np.allclose(result.accuracy, [0.5, 0.5])
    # many random predictions against a loop over the bins
    logits = rng.normal(size=(500, 4)) * 2
    P = special.softmax(logits, axis=1)
    labels = rng.integers(0, 4, size=500)
    ece_loop = 0.0
    for b in range(15):
        inside = (P.max(1) > b / 15) & (P.max(1) <= (b + 1) / 15)
        if inside.any():
            gap = np.mean(P.argmax(1)[inside] == labels[inside]) - P.max(1)[inside].mean()
            ece_loop += inside.mean() * abs(gap)
    assert np.isclose(theory.expected_calibration_error(P, labels, 15).ece, ece_loop, atol=1e-12)
    # a perfectly calibrated and a perfectly confident, always right classifier
    assert theory.expected_calibration_error(np.eye(3)[[0, 1, 2, 0]], np.array([0, 1, 2, 0])).ece == 0.0


def test_mh_accept_prob_is_the_min_of_one_and_the_hastings_ratio():
    new, old, fwd, bwd = (rng.normal(size=7) for _ in range(4))
    ratio = np.exp(new) * np.exp(bwd) / (np.exp(old) * np.exp(fwd))
    assert np.allclose(theory.mh_accept_prob(new, old, fwd, bwd), np.minimum(1.0, ratio), atol=1e-14)
    assert theory.mh_accept_prob(-np.inf, 0.0) == 0.0 and theory.mh_accept_prob(1.0, 0.0) == 1.0
    # p(S) cancels: shifting both log densities by the same constant changes nothing
    assert np.allclose(theory.mh_accept_prob(new + 700, old + 700, fwd, bwd), np.minimum(1.0, ratio))


def test_mh_transition_matrix_satisfies_detailed_balance_and_keeps_the_target():
    target = rng.uniform(0.1, 1.0, size=5)
    target /= target.sum()
    proposal = rng.uniform(0.0, 1.0, size=(5, 5))
    proposal /= proposal.sum(axis=1, keepdims=True)
    kernel = theory.mh_transition_matrix(target, proposal)
    flow = target[:, None] * kernel
    assert np.allclose(flow, flow.T, atol=1e-14) and np.allclose(target @ kernel, target, atol=1e-14)
    assert np.allclose(kernel.sum(axis=1), 1.0) and (kernel >= 0).all()
    i, j = 1, 3  # one entry by hand
    expected = proposal[i, j] * min(1.0, target[j] * proposal[j, i] / (target[i] * proposal[i, j]))
    assert np.isclose(kernel[i, j], expected)
    # unnormalised targets give the same kernel
    assert np.allclose(theory.mh_transition_matrix(7 * target, proposal), kernel, atol=1e-15)


def gaussian_target(rho=0.8, scales=(1.0, 2.0)):
    cov = np.diag(scales) @ np.array([[1.0, rho], [rho, 1.0]]) @ np.diag(scales)
    precision = np.linalg.inv(cov)
    return cov, lambda th: -0.5 * np.einsum("ci,ij,cj->c", th, precision, th), lambda th: -th @ precision


def test_metropolis_hastings_samples_a_gaussian():
    cov, log_p, _ = gaussian_target()
    chain = theory.metropolis_hastings(log_p, rng.normal(size=(100, 2)), 1200, 1.5, rng=1, progress=False)
    samples = chain.samples[200:].reshape(-1, 2)
    assert chain.samples.shape == (1200, 100, 2) and 0.2 < chain.accept_rate.mean() < 0.8
    assert np.abs(samples.mean(axis=0)).max() < 0.1
    assert np.abs(np.cov(samples.T) - cov).max() < 0.1 * cov.max()


def test_leapfrog_and_euler_equal_their_closed_form_maps_on_a_harmonic_oscillator():
    lam, eta, L = 3.0, 0.2, 7
    theta, v = np.array([0.7]), np.array([-0.4])
    leap = np.array(
        [[1 - eta**2 * lam / 2, eta], [-eta * lam * (1 - eta**2 * lam / 4), 1 - eta**2 * lam / 2]]
    )
    euler = np.array([[1.0, eta], [-eta * lam, 1.0]])
    start = np.array([0.7, -0.4])
    end = theory.leapfrog(lambda t: -lam * t, theta, v, eta, L)
    assert np.allclose([end.theta[0], end.v[0]], np.linalg.matrix_power(leap, L) @ start, atol=1e-13)
    end_e = theory.euler_hamiltonian(lambda t: -lam * t, theta, v, eta, L)
    assert np.allclose([end_e.theta[0], end_e.v[0]], np.linalg.matrix_power(euler, L) @ start, atol=1e-13)
    assert np.isclose(np.linalg.det(leap), 1.0) and np.linalg.det(euler) > 1.0


def test_leapfrog_is_reversible_and_its_energy_error_is_second_order():
    cov, log_p, grad = gaussian_target(rho=0.9, scales=(1.0, 1.0))
    theta, v = rng.normal(size=(500, 2)), rng.normal(size=(500, 2))
    end = theory.leapfrog(grad, theta, v, 0.1, 10)
    back = theory.leapfrog(grad, end.theta, -end.v, 0.1, 10)
    assert np.allclose(back.theta, theta, atol=1e-12) and np.allclose(-back.v, v, atol=1e-12)

    def mean_error(integrator, eta):
        e = integrator(grad, theta, v, eta, round(1 / eta))
        H0 = -log_p(theta) + 0.5 * np.sum(v**2, axis=1)
        return np.mean(np.abs(-log_p(e.theta) + 0.5 * np.sum(e.v**2, axis=1) - H0))

    etas = np.array([0.04, 0.02, 0.01])
    slope = np.polyfit(np.log(etas), np.log([mean_error(theory.leapfrog, e) for e in etas]), 1)[0]
    assert 1.8 < slope < 2.2
    assert mean_error(theory.euler_hamiltonian, 0.01) > 50 * mean_error(theory.leapfrog, 0.01)
    euler_end = theory.euler_hamiltonian(grad, theta, v, 0.1, 10)
    euler_back = theory.euler_hamiltonian(grad, euler_end.theta, -euler_end.v, 0.1, 10)
    assert np.abs(euler_back.theta - theta).max() > 0.1  # not reversible


def test_hmc_samples_a_gaussian_and_accepts_nearly_everything_for_small_steps():
    cov, log_p, grad = gaussian_target()
    chain = theory.hmc(log_p, grad, rng.normal(size=(100, 2)), 400, 0.1, 10, rng=2, progress=False)
    samples = chain.samples[50:].reshape(-1, 2)
    assert chain.accept_rate.mean() > 0.9 and chain.delta_H.shape == (400, 100)
    assert np.abs(samples.mean(axis=0)).max() < 0.1
    assert np.abs(np.cov(samples.T) - cov).max() < 0.1 * cov.max()


def test_sgld_without_noise_is_gradient_descent_and_with_noise_samples_the_posterior():
    X, y, noise_var, prior_var = linear_problem(n=20)
    n = len(y)
    seen = []

    def grad_energy_batch(theta, idx):
        seen.append(idx.copy())
        X_b = X[idx]
        residual = np.einsum("cbd,cd->cb", X_b, theta) - y[idx]
        return n / idx.shape[1] * np.einsum("cb,cbd->cd", residual, X_b) / noise_var + theta / prior_var

    theta0 = rng.normal(size=(3, 2))
    eta = 1e-3
    gd = theory.sgld(grad_energy_batch, theta0, 50, eta, n, n, temperature=0.0, rng=0, progress=False)
    theta = theta0.copy()
    for _ in range(50):
        theta = theta - eta * (X.T @ (theta @ X.T - y).T / noise_var).T - eta * theta / prior_var
    assert np.allclose(gd.samples[-1], theta, atol=1e-12) and gd.steps.tolist() == list(range(1, 51))
    # minibatches without replacement: every epoch (4 batches of 5) visits every example once, per chain
    seen.clear()
    theory.sgld(grad_energy_batch, theta0, 8, eta, 5, n, rng=0, progress=False)
    for epoch in (seen[:4], seen[4:]):
        assert all(sorted(np.concatenate(epoch, axis=1)[c].tolist()) == list(range(n)) for c in range(3))
    # heavy ball without noise: v <- (1 - eta gamma) v - eta g, theta <- theta + eta v
    under = theory.sgld(
        grad_energy_batch, theta0, 30, eta, n, n, temperature=0.0, friction=5.0, rng=0, progress=False
    )
    theta, v = theta0.copy(), np.zeros_like(theta0)
    for _ in range(30):
        v = (1 - eta * 5.0) * v - eta * grad_energy_batch(theta, np.tile(np.arange(n), (3, 1)))
        theta = theta + eta * v
    assert np.allclose(under.samples[-1], theta, atol=1e-12)
    # with noise: the posterior's mean and variance (full batch, small step)
    posterior = theory.bayes_linreg(X, y, noise_var, prior_var * np.eye(2))
    lam = np.linalg.eigvalsh(np.linalg.inv(posterior.cov))
    eta = 0.02 / lam[-1]
    burn = int(10 / (eta * lam[0]))
    chain = theory.sgld(
        grad_energy_batch,
        rng.normal(size=(100, 2)),
        burn + 1500,
        eta,
        n,
        n,
        burn_in=burn,
        thin=3,
        rng=3,
        progress=False,
    )
    samples = chain.samples.reshape(-1, 2)
    sd = np.sqrt(np.diag(posterior.cov))
    assert chain.samples.shape == (500, 100, 2)
    assert np.abs((samples.mean(axis=0) - posterior.mean) / sd).max() < 0.1
    assert np.abs(samples.var(axis=0) / sd**2 - 1).max() < 0.15


def test_tanh_mlp_and_its_energy_gradient_match_torch():
    d, m, n = 2, 6, 9
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(d, m), nn.Tanh(), nn.Linear(m, 1)).double()
    f, theta0 = theory.flat_function(model)
    X, y = rng.normal(size=(n, d)), rng.normal(size=n)
    thetas = np.stack([theta0.numpy(), rng.normal(size=len(theta0))])
    ours = theory.tanh_mlp(X, thetas, m)
    for theta, row in zip(thetas, ours, strict=True):
        assert np.allclose(
            row, f(torch.tensor(theta), torch.tensor(X)).reshape(-1).detach().numpy(), atol=1e-12
        )
    prior_var = rng.uniform(0.5, 2.0, size=len(theta0))
    grad_energy_batch = theory.tanh_mlp_grad_energy(X, y, m, 0.2, prior_var)
    idx = np.array([[0, 3, 5], [8, 1, 2]])
    ours_grad = grad_energy_batch(thetas, idx)
    for c in range(2):
        theta = torch.tensor(thetas[c], requires_grad=True)
        rows = torch.tensor(idx[c])
        residual = torch.tensor(y)[rows] - f(theta, torch.tensor(X)[rows]).reshape(-1)
        E = n / 3 * (residual**2).sum() / (2 * 0.2) + 0.5 * (theta**2 / torch.tensor(prior_var)).sum()
        E.backward()
        assert np.allclose(ours_grad[c], theta.grad.numpy(), atol=1e-10)


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: theory.log_likelihood(np.ones(3), np.ones(4), 1.0), ValueError, "predictions must have shape (3,) or (k, 3)"),
    (lambda: theory.log_likelihood(np.ones(3), np.ones(3), -1.0), ValueError, "noise_var must be a finite number"),
    (lambda: theory.energy(np.ones(3), np.ones((2, 3)), np.ones((3, 2)), 1.0, 1.0), ValueError, "theta must hold one parameter vector per row"),
    (lambda: theory.energy(np.ones(3), np.ones(3), np.ones(2), 1.0, np.ones(3)), ValueError, "prior_var must have shape (2,)"),
    (lambda: theory.energy(np.ones(3), np.ones(3), np.ones(2), 1.0, np.array([1.0, -1.0])), ValueError, "prior_var must hold variances > 0"),
    (lambda: theory.importance_weights(np.ones(3), np.ones(4)), ValueError, "log_proposal must have shape (3,)"),
    (lambda: theory.importance_weights([np.nan, 1.0]), ValueError, "log_target must hold finite numbers"),
    (lambda: theory.importance_ensemble(np.ones((4, 2)), np.zeros(3)), ValueError, "outputs must have one row per weight (3)"),
    (lambda: theory.expected_calibration_error(np.ones((2, 2)), [0, 1]), ValueError, "probs must hold probabilities"),
    (lambda: theory.expected_calibration_error(np.eye(2), [0, 2]), ValueError, "y must hold labels in 0..1"),
    (lambda: theory.expected_calibration_error(np.eye(2), [0, 1], bins=0), ValueError, "bins must be an int in [1, inf)"),
    (lambda: theory.mh_accept_prob(0.0, np.nan), ValueError, "log_p_old must hold finite numbers"),
    (lambda: theory.mh_accept_prob(np.inf, 0.0), ValueError, "log_p_new must hold numbers or -inf"),
    (lambda: theory.mh_transition_matrix([0.5, 0.0], np.eye(2)), ValueError, "target must hold probabilities > 0"),
    (lambda: theory.mh_transition_matrix([0.5, 0.5], [[0.5, 0.6], [0.5, 0.5]]), ValueError, "proposal must be a transition matrix"),
    (lambda: theory.mh_transition_matrix([0.5, 0.5], [[0.5, 0.5], [0.0, 1.0]]), ValueError, "proposal must allow the move back"),
    (lambda: theory.metropolis_hastings(lambda t: -t.sum(1), np.zeros(2), 10, 1.0), ValueError, "theta0 must have shape (chains, d)"),
    (lambda: theory.metropolis_hastings(lambda t: -t, np.zeros((3, 2)), 10, 1.0), ValueError, "log_p must map parameters (chains, d)"),
    (lambda: theory.metropolis_hastings(lambda t: -t.sum(1), np.zeros((3, 2)), 10, 0.0), ValueError, "step_size must be a finite number"),
    (lambda: theory.metropolis_hastings("log p", np.zeros((3, 2)), 10, 1.0), TypeError, "log_p must be callable"),
    (lambda: theory.leapfrog(lambda t: -t, np.zeros(2), np.zeros(3), 0.1, 2), ValueError, "v must have shape (2,)"),
    (lambda: theory.leapfrog(lambda t: -t[:1], np.zeros(2), np.zeros(2), 0.1, 2), ValueError, "grad_log_p must return the shape of theta"),
    (lambda: theory.euler_hamiltonian(lambda t: -t, np.zeros(2), np.zeros(2), 0.1, 0), ValueError, "L must be an int in [1, inf)"),
    (lambda: theory.hmc(lambda t: -t.sum(1), lambda t: -t, np.zeros((2, 2)), 5, -0.1, 3), ValueError, "eta must be a finite number"),
    (lambda: theory.sgld(lambda t, i: t, np.zeros((2, 2)), 10, 0.1, 30, 20), ValueError, "batch_size must be an int in [1, 20]"),
    (lambda: theory.sgld(lambda t, i: t, np.zeros((2, 2)), 10, 0.1, 5, 20, burn_in=10), ValueError, "burn_in must be an int in [0, 9]"),
    (lambda: theory.sgld(lambda t, i: t, np.zeros((2, 2)), 10, 0.1, 5, 20, temperature=-1.0), ValueError, "temperature must be a finite number"),
    (lambda: theory.sgld(lambda t, i: t, np.zeros((2, 2)), 10, 0.1, 5, 20, friction=20.0), ValueError, "friction must be a finite number in (0, 10.0]"),
    (lambda: theory.sgld(lambda t, i: t[:, :1], np.zeros((2, 2)), 10, 0.1, 5, 20), ValueError, "grad_energy_batch must return the shape of theta"),
    (lambda: theory.tanh_mlp(np.ones((3, 2)), np.ones((2, 9)), 3), ValueError, "theta must have shape (k, 13)"),
    (lambda: theory.tanh_mlp(np.ones((3, 2)), np.ones((2, 9)), 0), ValueError, "width must be an int in [1, inf)"),
    (lambda: theory.tanh_mlp_grad_energy(np.ones((3, 1)), np.ones(4), 2, 1.0, 1.0), ValueError, "y must have shape (3,)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
