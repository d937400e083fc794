"""dlnotes.generative.linear, section 10.1: PCA against numpy's eigen-decomposition of the covariance, the linear
autoencoder's gradients against torch autograd and its trained subspace against PCA, the factor-analysis
log-likelihood against scipy, its posterior against Gaussian conditioning of the joint, EM against
scikit-learn's FactorAnalysis, and probabilistic PCA against scikit-learn's PCA.get_covariance."""

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn.decomposition import PCA, FactorAnalysis

from dlnotes.generative import linear

from conftest import bad_input_test

rng = np.random.default_rng(11)


def fa_data(n=1500, d=6, k=2, seed=0):
    r = np.random.default_rng(seed)
    W = r.normal(size=(d, k))
    psi = r.uniform(0.3, 1.0, size=d) * np.abs(W @ W.T).max()
    mu = r.normal(size=d)
    X = mu + r.normal(size=(n, k)) @ W.T + r.normal(size=(n, d)) * np.sqrt(psi)
    return X, W, psi, mu


def test_pca_matches_the_eigen_decomposition_of_the_covariance():
    X = rng.normal(size=(40, 5)) @ rng.normal(size=(5, 5))
    fit = linear.pca(X, 2)
    S = np.cov(X.T, bias=True)
    evals, evecs = np.linalg.eigh(S)
    assert np.allclose(fit.lam, evals[::-1], atol=1e-12)
    assert np.allclose(fit.mu, X.mean(0))
    P = fit.U_k @ fit.U_k.T
    assert np.allclose(P, evecs[:, -2:] @ evecs[:, -2:].T, atol=1e-10)
    # the rank-k reconstruction error is the sum of the trailing eigenvalues
    Xc = X - fit.mu
    assert np.sum((Xc - Xc @ P) ** 2) / len(X) == pytest.approx(fit.lam[2:].sum(), rel=1e-10)
    # more columns than rows: the missing eigenvalues are zeros
    wide = linear.pca(rng.normal(size=(4, 7)), 3)
    assert wide.lam.shape == (7,) and np.allclose(wide.lam[4:], 0, atol=1e-12)


def test_linear_ae_gradients_match_autograd_and_training_finds_the_pca_subspace():
    X = rng.normal(size=(60, 6)) * np.array([3.0, 2.0, 1.5, 0.5, 0.3, 0.1])
    X = X - X.mean(0)
    C, D = rng.normal(size=(2, 6)), rng.normal(size=(6, 2))
    Ct, Dt = torch.tensor(C, requires_grad=True), torch.tensor(D, requires_grad=True)
    loss = ((torch.tensor(X) - torch.tensor(X) @ Ct.T @ Dt.T) ** 2).sum() / len(X)
    loss.backward()
    assert linear.linear_ae_loss(X, C, D) == pytest.approx(loss.item(), rel=1e-12)
    # one step of train_linear_ae from its own start equals the autograd step
    one = linear.train_linear_ae(X, 2, eta=0.01, steps=1, rng=3, progress=False)
    start = np.random.default_rng(3)
    C0, D0 = 0.1 * start.standard_normal((2, 6)), 0.1 * start.standard_normal((6, 2))
    C0t, D0t = torch.tensor(C0, requires_grad=True), torch.tensor(D0, requires_grad=True)
    (((torch.tensor(X) - torch.tensor(X) @ C0t.T @ D0t.T) ** 2).sum() / len(X)).backward()
    assert np.allclose(one.C, C0 - 0.01 * C0t.grad.numpy(), atol=1e-12)
    assert np.allclose(one.D, D0 - 0.01 * D0t.grad.numpy(), atol=1e-12)
    assert one.losses[0] == pytest.approx(linear.linear_ae_loss(X, C0, D0), rel=1e-12)
    # trained, span(D) is the top-2 principal subspace and the loss the trailing eigenvalue sum
    eta = 0.5 / linear.pca(X, 1).lam[0]
    ae = linear.train_linear_ae(X, 2, eta=eta, steps=3000, rng=0, progress=False)
    fit = linear.pca(X, 2)
    Q = np.linalg.qr(ae.D)[0]
    assert np.linalg.norm(Q @ Q.T - fit.U_k @ fit.U_k.T) < 1e-4
    assert ae.losses[-1] == pytest.approx(fit.lam[2:].sum(), rel=1e-3)


def test_fa_loglik_matches_scipy_and_is_invariant_under_rotations_only():
    X, W, psi, mu = fa_data(200)
    expected = stats.multivariate_normal(mu, W @ W.T + np.diag(psi)).logpdf(X).sum()
    assert linear.fa_loglik(X, W, psi, mu) == pytest.approx(expected, rel=1e-12)
    Q = np.linalg.qr(rng.normal(size=(2, 2)))[0]
    assert linear.fa_loglik(X, W @ Q, psi, mu) == pytest.approx(expected, rel=1e-12)
    A = rng.normal(size=(2, 2))
    assert abs(linear.fa_loglik(X, W @ A, psi, mu) - expected) > 1.0


def test_fa_posterior_matches_gaussian_conditioning_and_monte_carlo():
    X, W, psi, mu = fa_data(5)
    post = linear.fa_posterior(X, W, psi, mu)
    Sxx = W @ W.T + np.diag(psi)
    assert np.allclose(post.mean, (X - mu) @ np.linalg.solve(Sxx, W), atol=1e-12)
    assert np.allclose(post.cov, np.eye(2) - W.T @ np.linalg.solve(Sxx, W), atol=1e-12)
    # regression of z on x over joint samples estimates the posterior mean map
    r = np.random.default_rng(5)
    Z = r.normal(size=(200_000, 2))
    Xs = mu + Z @ W.T + r.normal(size=(200_000, 6)) * np.sqrt(psi)
    coef = np.linalg.lstsq(Xs - mu, Z, rcond=None)[0]  # (d, k)
    assert np.allclose(coef, np.linalg.solve(Sxx, W), atol=0.02)
    residual = Z - (Xs - mu) @ coef
    assert np.allclose(np.cov(residual.T), post.cov, atol=0.01)


def test_fa_em_increases_the_likelihood_and_agrees_with_sklearn():
    X, *_ = fa_data(1500, seed=1)
    fit = linear.fa_em(X, 2, steps=1500, rng=0, progress=False)
    assert np.diff(fit.logliks).min() > -1e-9 * abs(fit.logliks[-1])
    assert fit.logliks[-1] == pytest.approx(linear.fa_loglik(X, fit.W, fit.psi, fit.mu), rel=1e-12)
    sk = FactorAnalysis(2, svd_method="lapack", tol=1e-12, max_iter=100_000).fit(X)
    C_em = fit.W @ fit.W.T + np.diag(fit.psi)
    assert np.abs(C_em - sk.get_covariance()).max() < 1e-4 * np.abs(sk.get_covariance()).max()
    assert fit.logliks[-1] / len(X) == pytest.approx(sk.score(X), abs=1e-6)
    assert np.allclose(fit.mu, X.mean(0))


def test_ppca_matches_sklearn_and_maximises_the_likelihood():
    X = rng.normal(size=(300, 8)) @ rng.normal(size=(8, 8)) + 2.0
    for k in (1, 3, 7):
        fit = linear.ppca_mle(X, k)
        sk = PCA(k, svd_solver="full").fit(X)
        assert np.allclose(fit.W @ fit.W.T + fit.sigma2 * np.eye(8), sk.get_covariance(), atol=1e-10)
        assert fit.sigma2 == pytest.approx(sk.noise_variance_, rel=1e-10)
    # ddof=0 is the maximum-likelihood estimate: random perturbations lower the log-likelihood
    ml = linear.ppca_mle(X, 3, ddof=0)
    best = linear.fa_loglik(X, ml.W, np.full(8, ml.sigma2), ml.mu)
    r = np.random.default_rng(2)
    for _ in range(20):
        W_p = ml.W + 1e-2 * r.normal(size=ml.W.shape)
        s_p = ml.sigma2 * np.exp(1e-2 * r.normal())
        assert linear.fa_loglik(X, W_p, np.full(8, s_p), ml.mu) < best
    # the likelihood does not see a rotation of W
    Q = np.linalg.qr(r.normal(size=(3, 3)))[0]
    assert linear.fa_loglik(X, ml.W @ Q, np.full(8, ml.sigma2), ml.mu) == pytest.approx(best, rel=1e-12)


BAD_INPUT = [  # (call, error, message)
    (lambda: linear.pca(np.ones((5, 3)), 4), ValueError, "k must be an int in [1, 3]"),
    (lambda: linear.pca(np.ones(5), 1), ValueError, "X must have shape (any, any)"),
    (lambda: linear.linear_ae_loss(np.ones((4, 3)), np.ones((2, 3)), np.ones((3, 1))), ValueError, "D must have shape (3, 2)"),
    (lambda: linear.train_linear_ae(np.ones((4, 3)), 2, eta=0.0), ValueError, "eta must be a finite number in (0, inf)"),
    (lambda: linear.train_linear_ae(np.ones((4, 3)), 2, steps=1.5), TypeError, "steps must be an int"),
    (lambda: linear.fa_loglik(np.ones((4, 3)), np.ones((2, 1)), np.ones(3), np.zeros(3)), ValueError, "W must have shape (3, any)"),
    (lambda: linear.fa_loglik(np.ones((4, 3)), np.ones((3, 1)), [1.0, 0.0, 1.0], np.zeros(3)), ValueError, "psi (the diagonal of Psi) must be positive"),
    (lambda: linear.fa_posterior(np.ones((4, 3)), np.ones((3, 1)), np.ones(3), np.zeros(2)), ValueError, "mu must have shape (3,)"),
    (lambda: linear.fa_em(np.ones((4, 3)), 0), ValueError, "k must be an int in [1, 3]"),
    (lambda: linear.fa_em(np.ones((4, 3)), 1, rng="seed"), TypeError, "rng must be None, a seed"),
    (lambda: linear.ppca_mle(np.ones((4, 3)), 3), ValueError, "k must be an int in [1, 2]"),
    (lambda: linear.ppca_mle(np.ones((4, 3)), 1, ddof=2), ValueError, "ddof must be an int in [0, 1]"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
