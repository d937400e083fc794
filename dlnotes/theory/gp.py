"""Section 9.3, notebook ``05_gaussian_processes``: Gaussian processes and infinitely wide networks.

The RBF and linear kernels, draws from a Gaussian-process prior, Gaussian conditioning, GP regression and its
log marginal likelihood, the NNGP kernel of a deep ReLU network (the recursion `common.relu_ntk_deep`, shared
with 9.1), random ReLU networks and their features, and GP regression in the primal form of B features.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.linalg import cho_factor, cho_solve, solve_triangular

from ..validation import (
    check_int,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)
from .common import (
    relu_ntk_deep,
)


def rbf_kernel(X1, X2, lengthscale: float = 1.0) -> np.ndarray:
    """The RBF (squared-exponential) kernel, unit variance:
    :math:`k(x, x') = e^{-\\|x - x'\\|^2/(2\\ell^2)} = e^{-\\gamma\\|x - x'\\|^2}`, :math:`\\gamma = 1/(2\\ell^2)`.

    X1 (n1, d), X2 (n2, d), `lengthscale` ell > 0. Returns the Gram matrix K (n1, n2), K[i, j] = k(x1_i, x2_j).
    Section 9.3.
    """
    X1 = check_matrix(X1, "X1")
    X2 = check_matrix(X2, "X2", cols=X1.shape[1])
    lengthscale = check_positive(lengthscale, "lengthscale")
    sq = (X1**2).sum(1)[:, None] + (X2**2).sum(1)[None, :] - 2 * X1 @ X2.T
    return np.exp(-np.maximum(sq, 0.0) / (2 * lengthscale**2))


def linear_kernel(X1, X2, prior_cov=None) -> np.ndarray:
    """The linear kernel :math:`k(x, x') = x^\\top\\Sigma_p x'` of the model :math:`f(x) = w^\\top x`,
    :math:`w\\sim\\mathcal N(0, \\Sigma_p)` (default :math:`\\Sigma_p = I`, the kernel :math:`x^\\top x'`).

    X1 (n1, d), X2 (n2, d), `prior_cov` (d, d) symmetric positive semi-definite. Returns K (n1, n2). Section 9.3.
    """
    X1 = check_matrix(X1, "X1")
    d = X1.shape[1]
    X2 = check_matrix(X2, "X2", cols=d)
    if prior_cov is None:
        return X1 @ X2.T
    prior_cov = check_matrix(prior_cov, "prior_cov", d, d)
    if not np.allclose(prior_cov, prior_cov.T) or np.linalg.eigvalsh(prior_cov).min() < -1e-12:
        raise ValueError("prior_cov must be symmetric positive semi-definite")
    return X1 @ prior_cov @ X2.T


def _check_covariance(K, name: str, n: int | None = None) -> np.ndarray:
    K = check_matrix(K, name, n, n)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {K.shape}")
    if not np.allclose(K, K.T, rtol=1e-10, atol=1e-12):
        raise ValueError(f"{name} must be symmetric (a covariance matrix)")
    return K


def gp_prior_samples(K, draws: int, rng=None, jitter: float = 1e-8) -> np.ndarray:
    """Draws from the Gaussian-process prior at N inputs, :math:`f\\sim\\mathcal N(0, K)`:
    :math:`f = Lz`, :math:`z\\sim\\mathcal N(0, I)`, with the Cholesky factor :math:`LL^\\top = K + \\text{jitter}\\,I`
    (the jitter makes a singular K, e.g. a linear kernel on more inputs than dimensions, factorisable).

    K (N, N) symmetric positive semi-definite. Returns F (draws, N), one draw per row. Section 9.3.
    """
    K = _check_covariance(K, "K")
    draws = check_int(draws, "draws", 1)
    jitter = check_number(jitter, "jitter", 0)
    rng = check_rng(rng)
    try:
        L = np.linalg.cholesky(K + jitter * np.eye(len(K)))
    except np.linalg.LinAlgError:
        raise ValueError(
            f"K + jitter I is not positive definite (jitter = {jitter:g}): K must be a covariance matrix; "
            "a larger jitter helps a singular one"
        ) from None
    return rng.standard_normal((draws, len(K))) @ L.T


class Conditional(NamedTuple):
    mean: np.ndarray  # mu_{B|A} (n_B,): the conditional mean of the unobserved coordinates
    cov: np.ndarray  # Sigma_{B|A} (n_B, n_B): their conditional covariance
    idx: np.ndarray  # B (n_B,): the unobserved indices, in increasing order


def condition_gaussian(mu, Sigma, idx_observed, x_observed) -> Conditional:
    """Condition :math:`x\\sim\\mathcal N(\\mu, \\Sigma)` on the observed coordinates :math:`x_A`:

    .. math:: \\mu_{B|A} = \\mu_B + \\Sigma_{BA}\\Sigma_{AA}^{-1}(x_A - \\mu_A), \\qquad
              \\Sigma_{B|A} = \\Sigma_{BB} - \\Sigma_{BA}\\Sigma_{AA}^{-1}\\Sigma_{AB}.

    mu (N,), Sigma (N, N) symmetric with :math:`\\Sigma_{AA}` positive definite, `idx_observed` the indices A
    (distinct), `x_observed` (len(A),) their values. B are the other indices, in increasing order. Solves with
    the Cholesky factor of :math:`\\Sigma_{AA}`. Returns a `Conditional` (mean, cov, idx). Section 9.3.
    """
    mu = check_vector(mu, "mu")
    N = len(mu)
    Sigma = _check_covariance(Sigma, "Sigma", N)
    idx_A = np.asarray(idx_observed)
    if idx_A.ndim != 1 or idx_A.size == 0 or not np.issubdtype(idx_A.dtype, np.integer):
        raise TypeError(f"idx_observed must be a non-empty 1-D array of int indices, got {idx_observed!r}")
    if len(np.unique(idx_A)) != len(idx_A) or idx_A.min() < 0 or idx_A.max() >= N or len(idx_A) >= N:
        raise ValueError(
            f"idx_observed must hold distinct indices in 0..{N - 1}, fewer than {N}, got {idx_A.tolist()}"
        )
    x_A = check_vector(x_observed, "x_observed", len(idx_A))
    idx_B = np.setdiff1d(np.arange(N), idx_A)
    S_AA, S_BA = Sigma[np.ix_(idx_A, idx_A)], Sigma[np.ix_(idx_B, idx_A)]
    try:
        chol = cho_factor(S_AA, lower=True)
    except np.linalg.LinAlgError:
        raise ValueError("Sigma_AA (the observed block of Sigma) must be positive definite") from None
    mean = mu[idx_B] + S_BA @ cho_solve(chol, x_A - mu[idx_A])
    cov = Sigma[np.ix_(idx_B, idx_B)] - S_BA @ cho_solve(chol, S_BA.T)
    return Conditional(mean, (cov + cov.T) / 2, idx_B)


class GPPosterior(NamedTuple):
    mean: np.ndarray  # posterior mean of f at the test inputs (n_*,)
    var: np.ndarray  # posterior variance of the latent f (n_*,), without the noise variance


def gp_posterior(K, K_star, k_star_star, y, noise_var: float) -> GPPosterior:
    """Gaussian-process regression: the posterior of the latent :math:`f(x_*)` given noisy targets
    :math:`y = f(X) + \\text{noise}`, noise :math:`\\mathcal N(0, \\sigma^2 I)`:

    .. math:: \\bar f_* = k_*^\\top(K + \\sigma^2 I)^{-1}y, \\qquad
              \\mathrm{var}f_* = k(x_*, x_*) - k_*^\\top(K + \\sigma^2 I)^{-1}k_* .

    K (n, n) the Gram matrix of the training inputs, K_star (n_*, n) with K_star[i, j] = k(x*_i, x_j),
    `k_star_star` (n_*,) the prior variances k(x*_i, x*_i), y (n,), `noise_var` sigma^2 >= 0. Add sigma^2 to
    `var` for the predictive variance of a new noisy target y_*. With sigma^2 > 0 by a Cholesky factorisation;
    sigma^2 = 0 is the noise-free limit, with the pseudo-inverse :math:`K^+` (eigenvalues below
    :math:`10^{-10}\\lambda_{\\max}` count as 0). Variances are clipped at 0 (rounding). Returns a `GPPosterior`.
    Section 9.3.
    """
    K = _check_covariance(K, "K")
    n = len(K)
    K_star = check_matrix(K_star, "K_star", cols=n)
    k_star_star = check_vector(k_star_star, "k_star_star", len(K_star))
    y = check_vector(y, "y", n)
    noise_var = check_number(noise_var, "noise_var", 0)
    if noise_var == 0:
        lams, V = np.linalg.eigh(K)
        keep = lams > 1e-10 * max(lams.max(), 0.0)
        K_plus = (V[:, keep] / lams[keep]) @ V[:, keep].T
        mean = K_star @ K_plus @ y
        var = k_star_star - np.einsum("ij,jk,ik->i", K_star, K_plus, K_star)
        return GPPosterior(mean, np.maximum(var, 0.0))
    try:
        L = np.linalg.cholesky(K + noise_var * np.eye(n))
    except np.linalg.LinAlgError:
        raise ValueError("K + noise_var I must be positive definite: K must be a covariance matrix") from None
    alpha = cho_solve((L, True), y)
    V = solve_triangular(L, K_star.T, lower=True)  # (n, n_*): k_*^T (K + s^2 I)^{-1} k_* = ||V[:, i]||^2
    return GPPosterior(K_star @ alpha, np.maximum(k_star_star - (V**2).sum(axis=0), 0.0))


def gp_log_marginal_likelihood(K, y, noise_var: float) -> float:
    """The log marginal likelihood (evidence) of GP regression, :math:`y\\sim\\mathcal N(0, K + \\sigma^2 I)`:

    .. math:: \\log p(y) = -\\tfrac12 y^\\top(K + \\sigma^2 I)^{-1}y - \\tfrac12\\log\\det(K + \\sigma^2 I)
              - \\tfrac n2\\log 2\\pi ,

    the quantity that kernel hyper-parameters (length-scale, noise) are fitted to. K (n, n), y (n,),
    `noise_var` sigma^2 > 0. By a Cholesky factor L: log det = 2 sum_i log L_ii. Section 9.3.
    """
    K = _check_covariance(K, "K")
    n = len(K)
    y = check_vector(y, "y", n)
    noise_var = check_positive(noise_var, "noise_var")
    try:
        L = np.linalg.cholesky(K + noise_var * np.eye(n))
    except np.linalg.LinAlgError:
        raise ValueError("K + noise_var I must be positive definite: K must be a covariance matrix") from None
    z = solve_triangular(L, y, lower=True)
    return float(-0.5 * z @ z - np.log(np.diag(L)).sum() - 0.5 * n * math.log(2 * math.pi))


def relu_nngp(X1, X2, depth: int, sigma_w2: float = 2.0, sigma_b2: float = 0.0) -> np.ndarray:
    """The NNGP kernel :math:`K^L` of a random ReLU network with L = `depth` layers of weights (L - 1 hidden
    ReLU layers), weights :math:`\\mathcal N(0, \\sigma_w^2/\\text{fan-in})`, biases :math:`\\mathcal N(0, \\sigma_b^2)`,
    in the limit of infinite width (Neal 1996; Lee et al. 2018; Matthews et al. 2018):

    .. math:: K^1(x, x') = \\sigma_b^2 + \\sigma_w^2\\frac{x^\\top x'}{d}, \\qquad
              K^l(x, x') = \\sigma_b^2 + \\sigma_w^2\\,\\mathbb E_{f\\sim\\mathcal{GP}(0, K^{l-1})}[\\varphi(f(x))\\varphi(f(x'))],

    the expectation from `common.relu_gaussian_moments` (the arc-cosine kernel of Cho and Saul): the
    :math:`\\Sigma^L` of the recursion `common.relu_ntk_deep`, which also gives the NTK (9.1). ``depth=1`` is the
    linear kernel; a network with one hidden layer has ``depth=2``. X1 (n1, d), X2 (n2, d). Returns
    :math:`K^L` (n1, n2), the covariance of any unit of layer L's pre-activations. Section 9.3.
    """
    return relu_ntk_deep(X1, X2, depth, sigma_w2, sigma_b2).nngp


def random_relu_network(
    X,
    depth: int,
    width: int,
    rng=None,
    *,
    nets: int = 1,
    out_width: int = 1,
    sigma_w2: float = 2.0,
    sigma_b2: float = 0.0,
) -> np.ndarray:
    """The outputs of `nets` independent random ReLU networks with L = `depth` layers of weights:
    :math:`h^1 = W^1x + b^1`, :math:`h^l = W^l\\varphi(h^{l-1}) + b^l`, weights
    :math:`\\mathcal N(0, \\sigma_w^2/\\text{fan-in})`, biases :math:`\\mathcal N(0, \\sigma_b^2)`, hidden layers of
    `width` units, the last of `out_width` units. As width -> infinity every output unit is a
    :math:`\\mathcal{GP}(0, K^L)` (`relu_nngp`).

    X (n, d). Returns H (nets, n, out_width): H[j] = h^L(X) of network j. Each network draws W^1, b^1, W^2, ...
    in order. Section 9.3.
    """
    X = check_matrix(X, "X")
    depth = check_int(depth, "depth", 1)
    width = check_int(width, "width", 1)
    nets = check_int(nets, "nets", 1)
    out_width = check_int(out_width, "out_width", 1)
    sigma_w2 = check_positive(sigma_w2, "sigma_w2")
    sigma_b2 = check_number(sigma_b2, "sigma_b2", 0)
    rng = check_rng(rng)
    sizes = [X.shape[1]] + [width] * (depth - 1) + [out_width]
    out = np.empty((nets, len(X), out_width))
    for j in range(nets):
        h = X
        for l in range(depth):
            fan_in, fan_out = sizes[l], sizes[l + 1]
            W = rng.standard_normal((fan_in, fan_out)) * math.sqrt(sigma_w2 / fan_in)
            b = rng.standard_normal(fan_out) * math.sqrt(sigma_b2)
            h = (h if l == 0 else np.maximum(h, 0.0)) @ W + b
        out[j] = h
    return out


def random_relu_features(
    X, depth: int, width: int, B: int, rng=None, *, sigma_w2: float = 2.0, sigma_b2: float = 0.0
) -> np.ndarray:
    """Random-network features :math:`\\varphi(x) = B^{-1/2}(f_b(x))_{b\\le B}`: the scalar outputs of B
    independent random ReLU networks (`random_relu_network`, one output unit). Their inner product
    :math:`\\varphi(x)^\\top\\varphi(x')` is a Monte-Carlo estimate of the networks' output covariance, the NNGP
    kernel `relu_nngp` at infinite width.

    X (n, d). Returns Phi (n, B), row i = phi(x_i). Section 9.3.
    """
    B = check_int(B, "B", 1)
    outputs = random_relu_network(X, depth, width, rng, nets=B, sigma_w2=sigma_w2, sigma_b2=sigma_b2)
    return outputs[:, :, 0].T / math.sqrt(B)


def nngp_feature_regression(Phi, y, Phi_star, noise_var: float) -> GPPosterior:
    """GP regression with the kernel :math:`k(x, x') = \\varphi(x)^\\top\\varphi(x')` of B features, in the primal
    (B x B) form, Bayesian linear regression on the features with prior :math:`\\mathcal N(0, I_B)`:

    .. math:: \\bar f_* = \\varphi_*^\\top(\\Phi^\\top\\Phi + \\sigma^2 I_B)^{-1}\\Phi^\\top y, \\qquad
              \\mathrm{var}f_* = \\sigma^2\\varphi_*^\\top(\\Phi^\\top\\Phi + \\sigma^2 I_B)^{-1}\\varphi_* ,

    equal to `gp_posterior` with K = Phi Phi^T (the n x n dual form) at the cost O(n B^2 + B^3) instead of
    O(n^3). Phi (n, B), y (n,), Phi_star (n_*, B), `noise_var` sigma^2 > 0. Returns a `GPPosterior`. Section 9.3.
    """
    Phi = check_matrix(Phi, "Phi")
    n, B = Phi.shape
    y = check_vector(y, "y", n)
    Phi_star = check_matrix(Phi_star, "Phi_star", cols=B)
    noise_var = check_positive(noise_var, "noise_var")
    chol = cho_factor(Phi.T @ Phi + noise_var * np.eye(B), lower=True)
    mean = Phi_star @ cho_solve(chol, Phi.T @ y)
    var = noise_var * np.einsum("ij,ji->i", Phi_star, cho_solve(chol, Phi_star.T))
    return GPPosterior(mean, np.maximum(var, 0.0))
