"""Section 9.3 (dlnotes.theory.gp): kernels against sklearn.metrics.pairwise, prior draws against their covariance,
Gaussian conditioning against the precision-matrix form, GP regression and its evidence against scikit-learn's
GaussianProcessRegressor, the noise-free limit against least squares, the NNGP kernel against its one-layer
closed form and Monte Carlo over random networks, the primal random-feature regression against the dual."""

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF
from sklearn.metrics import pairwise

from dlnotes.theory import common, gp

from conftest import bad_input_test

rng = np.random.default_rng(93)


def test_kernels_match_sklearn_pairwise():
    X1, X2, ell = rng.normal(size=(6, 3)), rng.normal(size=(4, 3)), 0.7
    K = gp.rbf_kernel(X1, X2, ell)
    assert np.allclose(K, pairwise.rbf_kernel(X1, X2, gamma=1 / (2 * ell**2)), atol=1e-14)
    assert np.allclose(np.diag(gp.rbf_kernel(X1, X1, ell)), 1.0)
    assert np.allclose(gp.linear_kernel(X1, X2), pairwise.linear_kernel(X1, X2), atol=1e-14)
    L = rng.normal(size=(3, 3))  # prior covariance L L^T: the kernel of the features x -> L^T x
    assert np.allclose(gp.linear_kernel(X1, X2, L @ L.T), pairwise.linear_kernel(X1 @ L, X2 @ L), atol=1e-12)


def test_gp_prior_samples_have_covariance_K_even_when_K_is_singular():
    X = rng.normal(size=(8, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    for K in (gp.rbf_kernel(X, X, 1.0), gp.linear_kernel(X, X)):  # the second has rank 2
        F = gp.gp_prior_samples(K, 40_000, rng=1)
        assert F.shape == (40_000, 8)
        assert np.abs(F.T @ F / len(F) - K).max() < 0.04 and np.abs(F.mean(axis=0)).max() < 0.03
    assert np.array_equal(gp.gp_prior_samples(K, 3, rng=5), gp.gp_prior_samples(K, 3, rng=5))


def test_condition_gaussian_equals_the_precision_form():
    A = rng.normal(size=(6, 6))
    Sigma, mu = A @ A.T + 0.5 * np.eye(6), rng.normal(size=6)
    idx_a, x_a = np.array([4, 1]), rng.normal(size=2)
    result = gp.condition_gaussian(mu, Sigma, idx_a, x_a)
    idx_b = np.array([0, 2, 3, 5])
    Lam = np.linalg.inv(Sigma)
    Lam_bb, Lam_ba = Lam[np.ix_(idx_b, idx_b)], Lam[np.ix_(idx_b, idx_a)]
    assert np.array_equal(result.idx, idx_b)
    assert np.allclose(result.cov, np.linalg.inv(Lam_bb), atol=1e-10)
    assert np.allclose(
        result.mean, mu[idx_b] - np.linalg.solve(Lam_bb, Lam_ba @ (x_a - mu[idx_a])), atol=1e-10
    )
    # two dimensions, correlation rho: x2 | x1 ~ N(rho x1, 1 - rho^2)
    two = gp.condition_gaussian(np.zeros(2), np.array([[1.0, 0.6], [0.6, 1.0]]), [0], [2.0])
    assert np.allclose(two.mean, [1.2]) and np.allclose(two.cov, [[0.64]])


def test_gp_posterior_matches_sklearn_and_gaussian_conditioning():
    X, X_star = rng.uniform(-3, 3, size=(15, 2)), rng.uniform(-3, 3, size=(7, 2))
    y, ell, noise_var = rng.normal(size=15), 0.9, 0.05
    K, K_star = gp.rbf_kernel(X, X, ell), gp.rbf_kernel(X_star, X, ell)
    post = gp.gp_posterior(K, K_star, np.ones(7), y, noise_var)
    gpr = GaussianProcessRegressor(kernel=RBF(ell), alpha=noise_var, optimizer=None).fit(X, y)
    mean, std = gpr.predict(X_star, return_std=True)
    assert np.allclose(post.mean, mean, atol=1e-10) and np.allclose(np.sqrt(post.var), std, atol=1e-10)
    # the same posterior by conditioning the joint Gaussian of (y, f_*) on y
    joint = np.block([[K + noise_var * np.eye(15), K_star.T], [K_star, gp.rbf_kernel(X_star, X_star, ell)]])
    cond = gp.condition_gaussian(np.zeros(22), joint, np.arange(15), y)
    assert np.allclose(cond.mean, post.mean, atol=1e-10) and np.allclose(
        np.diag(cond.cov), post.var, atol=1e-10
    )
    ll = gp.gp_log_marginal_likelihood(K, y, noise_var)
    assert abs(ll - gpr.log_marginal_likelihood_value_) < 1e-9


def test_noise_free_limit_is_the_pseudo_inverse_and_least_squares():
    X, X_star = np.c_[rng.normal(size=12), np.ones(12)], np.c_[rng.normal(size=5), np.ones(5)]
    y = rng.normal(size=12)
    K, K_star = gp.linear_kernel(X, X), gp.linear_kernel(X_star, X)  # rank 2 < 12: singular
    exact = gp.gp_posterior(K, K_star, (X_star**2).sum(axis=1), y, 0.0)
    w_min_norm = np.linalg.lstsq(X, y, rcond=None)[0]
    assert np.allclose(exact.mean, X_star @ w_min_norm, atol=1e-10) and np.allclose(exact.var, 0, atol=1e-10)
    gaps = [
        np.abs(gp.gp_posterior(K, K_star, np.ones(5), y, s).mean - exact.mean).max() for s in (1e-2, 1e-4)
    ]
    assert 50 < gaps[0] / gaps[1] < 200  # the error of the noisy posterior falls like sigma^2


def test_relu_nngp_is_linear_at_depth_one_and_the_arc_cosine_kernel_at_depth_two():
    X1, X2 = rng.normal(size=(5, 4)), rng.normal(size=(3, 4))
    sw, sb = 1.7, 0.3
    K1 = gp.relu_nngp(X1, X2, 1, sw, sb)
    assert np.allclose(K1, sb + sw * X1 @ X2.T / 4, atol=1e-14)
    k11, k22 = sb + sw * (X1**2).sum(1) / 4, sb + sw * (X2**2).sum(1) / 4
    E = common.relu_gaussian_moments(k11[:, None], K1, k22[None, :])[0]
    assert np.allclose(gp.relu_nngp(X1, X2, 2, sw, sb), sb + sw * E, atol=1e-14)
    # symmetric in its arguments, and with sigma_w^2 = 2, sigma_b^2 = 0 the diagonal is kept through depth
    assert np.allclose(gp.relu_nngp(X1, X2, 3).T, gp.relu_nngp(X2, X1, 3), atol=1e-14)
    assert np.allclose(np.diag(gp.relu_nngp(X1, X1, 6)), 2 * (X1**2).sum(1) / 4)


def test_relu_nngp_matches_random_networks():
    X = rng.normal(size=(4, 5)) * np.array([[0.5], [1.0], [1.5], [2.0]])
    H = gp.random_relu_network(X, 3, 400, rng=2, nets=40, out_width=400, sigma_w2=2.0, sigma_b2=0.2)
    assert H.shape == (40, 4, 400)
    K_mc = np.einsum("jnk,jmk->nm", H, H) / (40 * 400)
    K = gp.relu_nngp(X, X, 3, 2.0, 0.2)
    assert np.abs(K_mc / K - 1).max() < 0.1  # measured 0.03-0.06 over seeds; without sigma_b^2 it is > 1
    # depth 2: the output covariance over random nets is the NNGP kernel at any width; ReLU features too
    Z = rng.normal(size=(3, 2))
    Phi = gp.random_relu_features(Z, 2, 3, 20_000, rng=3, sigma_w2=2.0, sigma_b2=0.5)
    assert Phi.shape == (3, 20_000)
    K2 = gp.relu_nngp(Z, Z, 2, 2.0, 0.5)
    assert np.abs(Phi @ Phi.T - K2).max() < 0.05 * K2.max()


def test_nngp_feature_regression_equals_the_dual_and_bayesian_linear_regression():
    Phi, Phi_star, y, noise_var = rng.normal(size=(30, 8)), rng.normal(size=(6, 8)), rng.normal(size=30), 0.3
    primal = gp.nngp_feature_regression(Phi, y, Phi_star, noise_var)
    dual = gp.gp_posterior(Phi @ Phi.T, Phi_star @ Phi.T, (Phi_star**2).sum(1), y, noise_var)
    assert np.allclose(primal.mean, dual.mean, atol=1e-10) and np.allclose(primal.var, dual.var, atol=1e-10)
    post = common.bayes_linreg(Phi, y, noise_var)  # weights ~ N(0, I)
    assert np.allclose(primal.mean, Phi_star @ post.mean, atol=1e-10)
    assert np.allclose(primal.var, np.einsum("ij,jk,ik->i", Phi_star, post.cov, Phi_star), atol=1e-10)


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: gp.rbf_kernel(np.ones((3, 2)), np.ones((3, 4))), ValueError, "X2 must have shape (any, 2)"),
    (lambda: gp.rbf_kernel(np.ones((3, 2)), np.ones((3, 2)), 0.0), ValueError, "lengthscale must be a finite number"),
    (lambda: gp.rbf_kernel(np.ones(3), np.ones(3)), ValueError, "X1 must have shape (any, any)"),
    (lambda: gp.linear_kernel(np.ones((3, 2)), np.ones((3, 2)), -np.eye(2)), ValueError, "prior_cov must be symmetric positive semi-definite"),
    (lambda: gp.gp_prior_samples(np.ones((2, 3)), 5), ValueError, "K must be a square matrix"),
    (lambda: gp.gp_prior_samples(-np.eye(2), 5), ValueError, "K + jitter I is not positive definite"),
    (lambda: gp.gp_prior_samples(np.eye(2), 0), ValueError, "draws must be an int in [1, inf)"),
    (lambda: gp.gp_prior_samples(np.eye(2), 3, rng="seed"), TypeError, "rng must be None, a seed"),
    (lambda: gp.condition_gaussian(np.zeros(3), np.eye(3), [0, 0], [1.0, 1.0]), ValueError, "idx_observed must hold distinct indices"),
    (lambda: gp.condition_gaussian(np.zeros(3), np.eye(3), [0.5], [1.0]), TypeError, "idx_observed must be a non-empty 1-D array of int"),
    (lambda: gp.condition_gaussian(np.zeros(3), np.eye(3), [0], [1.0, 2.0]), ValueError, "x_observed must have shape (1,)"),
    (lambda: gp.condition_gaussian(np.zeros(3), np.eye(2), [0], [1.0]), ValueError, "Sigma must have shape (3, 3)"),
    (lambda: gp.condition_gaussian(np.zeros(2), np.array([[1.0, 2.0], [0.0, 1.0]]), [0], [1.0]), ValueError, "Sigma must be symmetric"),
    (lambda: gp.gp_posterior(np.eye(3), np.ones((2, 4)), np.ones(2), np.ones(3), 0.1), ValueError, "K_star must have shape (any, 3)"),
    (lambda: gp.gp_posterior(np.eye(3), np.ones((2, 3)), np.ones(3), np.ones(3), 0.1), ValueError, "k_star_star must have shape (2,)"),
    (lambda: gp.gp_posterior(np.eye(3), np.ones((2, 3)), np.ones(2), np.ones(3), -0.1), ValueError, "noise_var must be a finite number in [0, inf)"),
    (lambda: gp.gp_log_marginal_likelihood(np.eye(3), np.ones(2), 0.1), ValueError, "y must have shape (3,)"),
    (lambda: gp.relu_nngp(np.ones((2, 3)), np.ones((2, 3)), 0), ValueError, "depth must be an int in [1, inf)"),
    (lambda: gp.relu_nngp(np.zeros((2, 3)), np.ones((2, 3)), 2), ValueError, "give sigma_b2 > 0 or nonzero inputs"),
    (lambda: gp.relu_nngp(np.ones((2, 3)), np.ones((2, 3)), 2, sigma_w2=0.0), ValueError, "sigma_w2 must be a finite number"),
    (lambda: gp.random_relu_network(np.ones((2, 3)), 2, 2.5), TypeError, "width must be an int"),
    (lambda: gp.random_relu_features(np.ones((2, 3)), 2, 4, 0), ValueError, "B must be an int in [1, inf)"),
    (lambda: gp.nngp_feature_regression(np.ones((4, 3)), np.ones(4), np.ones((2, 5)), 0.1), ValueError, "Phi_star must have shape (any, 3)"),
    (lambda: gp.nngp_feature_regression(np.ones((4, 3)), np.ones(4), np.ones((2, 3)), 0.0), ValueError, "noise_var must be a finite number in (0, inf)"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
