"""Section 9.2 continued (dlnotes.theory.sampling): the Metropolis-Hastings kernel against detailed balance, the
samplers (Metropolis-Hastings, HMC, SGLD) against the moments of known Gaussians, leapfrog and Euler against their
closed-form maps on a harmonic oscillator, SGLD without noise against gradient descent."""

import numpy as np

from dlnotes.theory import common, sampling

from conftest import bad_input_test
from test_theory_common import linear_problem

rng = np.random.default_rng(97)


def test_mh_accept_prob_is_the_min_of_one_and_the_hastings_ratio():
    new, old, fwd, bwd = (rng.normal(size=7) for _ in range(4))
    ratio = np.exp(new) * np.exp(bwd) / (np.exp(old) * np.exp(fwd))
    assert np.allclose(sampling.mh_accept_prob(new, old, fwd, bwd), np.minimum(1.0, ratio), atol=1e-14)
    assert sampling.mh_accept_prob(-np.inf, 0.0) == 0.0 and sampling.mh_accept_prob(1.0, 0.0) == 1.0
    # p(S) cancels: shifting both log densities by the same constant changes nothing
    assert np.allclose(sampling.mh_accept_prob(new + 700, old + 700, fwd, bwd), np.minimum(1.0, ratio))


def test_mh_transition_matrix_satisfies_detailed_balance_and_keeps_the_target():
    target = rng.uniform(0.1, 1.0, size=5)
    target /= target.sum()
    proposal = rng.uniform(0.0, 1.0, size=(5, 5))
    proposal /= proposal.sum(axis=1, keepdims=True)
    kernel = sampling.mh_transition_matrix(target, proposal)
    flow = target[:, None] * kernel
    assert np.allclose(flow, flow.T, atol=1e-14) and np.allclose(target @ kernel, target, atol=1e-14)
    assert np.allclose(kernel.sum(axis=1), 1.0) and (kernel >= 0).all()
    i, j = 1, 3  # one entry by hand
    expected = proposal[i, j] * min(1.0, target[j] * proposal[j, i] / (target[i] * proposal[i, j]))
    assert np.isclose(kernel[i, j], expected)
    # unnormalised targets give the same kernel
    assert np.allclose(sampling.mh_transition_matrix(7 * target, proposal), kernel, atol=1e-15)


def gaussian_target(rho=0.8, scales=(1.0, 2.0)):
    cov = np.diag(scales) @ np.array([[1.0, rho], [rho, 1.0]]) @ np.diag(scales)
    precision = np.linalg.inv(cov)
    return cov, lambda th: -0.5 * np.einsum("ci,ij,cj->c", th, precision, th), lambda th: -th @ precision


def test_metropolis_hastings_samples_a_gaussian():
    cov, log_p, _ = gaussian_target()
    chain = sampling.metropolis_hastings(log_p, rng.normal(size=(100, 2)), 1200, 1.5, rng=1, progress=False)
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
    end = sampling.leapfrog(lambda t: -lam * t, theta, v, eta, L)
    assert np.allclose([end.theta[0], end.v[0]], np.linalg.matrix_power(leap, L) @ start, atol=1e-13)
    end_e = sampling.euler_hamiltonian(lambda t: -lam * t, theta, v, eta, L)
    assert np.allclose([end_e.theta[0], end_e.v[0]], np.linalg.matrix_power(euler, L) @ start, atol=1e-13)
    assert np.isclose(np.linalg.det(leap), 1.0) and np.linalg.det(euler) > 1.0


def test_leapfrog_is_reversible_and_its_energy_error_is_second_order():
    cov, log_p, grad = gaussian_target(rho=0.9, scales=(1.0, 1.0))
    theta, v = rng.normal(size=(500, 2)), rng.normal(size=(500, 2))
    end = sampling.leapfrog(grad, theta, v, 0.1, 10)
    back = sampling.leapfrog(grad, end.theta, -end.v, 0.1, 10)
    assert np.allclose(back.theta, theta, atol=1e-12) and np.allclose(-back.v, v, atol=1e-12)

    def mean_error(integrator, eta):
        e = integrator(grad, theta, v, eta, round(1 / eta))
        H0 = -log_p(theta) + 0.5 * np.sum(v**2, axis=1)
        return np.mean(np.abs(-log_p(e.theta) + 0.5 * np.sum(e.v**2, axis=1) - H0))

    etas = np.array([0.04, 0.02, 0.01])
    slope = np.polyfit(np.log(etas), np.log([mean_error(sampling.leapfrog, e) for e in etas]), 1)[0]
    assert 1.8 < slope < 2.2
    assert mean_error(sampling.euler_hamiltonian, 0.01) > 50 * mean_error(sampling.leapfrog, 0.01)
    euler_end = sampling.euler_hamiltonian(grad, theta, v, 0.1, 10)
    euler_back = sampling.euler_hamiltonian(grad, euler_end.theta, -euler_end.v, 0.1, 10)
    assert np.abs(euler_back.theta - theta).max() > 0.1  # not reversible


def test_hmc_samples_a_gaussian_and_accepts_nearly_everything_for_small_steps():
    cov, log_p, grad = gaussian_target()
    chain = sampling.hmc(log_p, grad, rng.normal(size=(100, 2)), 400, 0.1, 10, rng=2, progress=False)
    samples = chain.samples[50:].reshape(-1, 2)
    assert chain.accept_rate.mean() > 0.9 and chain.delta_H.shape == (400, 100)
    assert np.abs(samples.mean(axis=0)).max() < 0.1
    assert np.abs(np.cov(samples.T) - cov).max() < 0.1 * cov.max()


def test_sgld_without_noise_is_gradient_descent_and_with_noise_samples_the_posterior():
    X, y, noise_var, prior_var = linear_problem(rng, n=20)
    n = len(y)
    seen = []

    def grad_energy_batch(theta, idx):
        seen.append(idx.copy())
        X_b = X[idx]
        residual = np.einsum("cbd,cd->cb", X_b, theta) - y[idx]
        return n / idx.shape[1] * np.einsum("cb,cbd->cd", residual, X_b) / noise_var + theta / prior_var

    theta0 = rng.normal(size=(3, 2))
    eta = 1e-3
    gd = sampling.sgld(grad_energy_batch, theta0, 50, eta, n, n, temperature=0.0, rng=0, progress=False)
    theta = theta0.copy()
    for _ in range(50):
        theta = theta - eta * (X.T @ (theta @ X.T - y).T / noise_var).T - eta * theta / prior_var
    assert np.allclose(gd.samples[-1], theta, atol=1e-12) and gd.steps.tolist() == list(range(1, 51))
    # minibatches without replacement: every epoch (4 batches of 5) visits every example once, per chain
    seen.clear()
    sampling.sgld(grad_energy_batch, theta0, 8, eta, 5, n, rng=0, progress=False)
    for epoch in (seen[:4], seen[4:]):
        assert all(sorted(np.concatenate(epoch, axis=1)[c].tolist()) == list(range(n)) for c in range(3))
    # heavy ball without noise: v <- (1 - eta gamma) v - eta g, theta <- theta + eta v
    under = sampling.sgld(
        grad_energy_batch, theta0, 30, eta, n, n, temperature=0.0, friction=5.0, rng=0, progress=False
    )
    theta, v = theta0.copy(), np.zeros_like(theta0)
    for _ in range(30):
        v = (1 - eta * 5.0) * v - eta * grad_energy_batch(theta, np.tile(np.arange(n), (3, 1)))
        theta = theta + eta * v
    assert np.allclose(under.samples[-1], theta, atol=1e-12)
    # with noise: the posterior's mean and variance (full batch, small step)
    posterior = common.bayes_linreg(X, y, noise_var, prior_var * np.eye(2))
    lam = np.linalg.eigvalsh(np.linalg.inv(posterior.cov))
    eta = 0.02 / lam[-1]
    burn = int(10 / (eta * lam[0]))
    chain = sampling.sgld(
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


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: sampling.mh_accept_prob(0.0, np.nan), ValueError, "log_p_old must hold finite numbers"),
    (lambda: sampling.mh_accept_prob(np.inf, 0.0), ValueError, "log_p_new must hold numbers or -inf"),
    (lambda: sampling.mh_transition_matrix([0.5, 0.0], np.eye(2)), ValueError, "target must hold probabilities > 0"),
    (lambda: sampling.mh_transition_matrix([0.5, 0.5], [[0.5, 0.6], [0.5, 0.5]]), ValueError, "proposal must be a transition matrix"),
    (lambda: sampling.mh_transition_matrix([0.5, 0.5], [[0.5, 0.5], [0.0, 1.0]]), ValueError, "proposal must allow the move back"),
    (lambda: sampling.metropolis_hastings(lambda t: -t.sum(1), np.zeros(2), 10, 1.0), ValueError, "theta0 must have shape (chains, d)"),
    (lambda: sampling.metropolis_hastings(lambda t: -t, np.zeros((3, 2)), 10, 1.0), ValueError, "log_p must map parameters (chains, d)"),
    (lambda: sampling.metropolis_hastings(lambda t: -t.sum(1), np.zeros((3, 2)), 10, 0.0), ValueError, "step_size must be a finite number"),
    (lambda: sampling.metropolis_hastings("log p", np.zeros((3, 2)), 10, 1.0), TypeError, "log_p must be callable"),
    (lambda: sampling.leapfrog(lambda t: -t, np.zeros(2), np.zeros(3), 0.1, 2), ValueError, "v must have shape (2,)"),
    (lambda: sampling.leapfrog(lambda t: -t[:1], np.zeros(2), np.zeros(2), 0.1, 2), ValueError, "grad_log_p must return the shape of theta"),
    (lambda: sampling.euler_hamiltonian(lambda t: -t, np.zeros(2), np.zeros(2), 0.1, 0), ValueError, "L must be an int in [1, inf)"),
    (lambda: sampling.hmc(lambda t: -t.sum(1), lambda t: -t, np.zeros((2, 2)), 5, -0.1, 3), ValueError, "eta must be a finite number"),
    (lambda: sampling.sgld(lambda t, i: t, np.zeros((2, 2)), 10, 0.1, 30, 20), ValueError, "batch_size must be an int in [1, 20]"),
    (lambda: sampling.sgld(lambda t, i: t, np.zeros((2, 2)), 10, 0.1, 5, 20, burn_in=10), ValueError, "burn_in must be an int in [0, 9]"),
    (lambda: sampling.sgld(lambda t, i: t, np.zeros((2, 2)), 10, 0.1, 5, 20, temperature=-1.0), ValueError, "temperature must be a finite number"),
    (lambda: sampling.sgld(lambda t, i: t, np.zeros((2, 2)), 10, 0.1, 5, 20, friction=20.0), ValueError, "friction must be a finite number in (0, 10.0]"),
    (lambda: sampling.sgld(lambda t, i: t[:, :1], np.zeros((2, 2)), 10, 0.1, 5, 20), ValueError, "grad_energy_batch must return the shape of theta"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
