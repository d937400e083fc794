"""Section 10.1 of chapter 10, linear latent-variable models (notebook 01_linear_latent): PCA, the linear
autoencoder trained by gradient descent, factor analysis (log-likelihood, posterior, EM) and probabilistic PCA
in closed form.

Conventions: a data set is X (n, d), one example per row.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..training import progress_bar
from ..validation import (
    check_array,
    check_int,
    check_positive,
    check_rng,
    check_vector,
)


class PCAFit(NamedTuple):
    mu: np.ndarray  # (d,) the mean of the data
    U_k: np.ndarray  # (d, k) the top-k eigenvectors of the covariance, as columns
    lam: np.ndarray  # (d,) all eigenvalues of the covariance, in decreasing order


def pca(X, k: int) -> PCAFit:
    """Principal component analysis: the eigen-decomposition of the covariance
    :math:`S = \\frac1n (X-\\bar x)^\\top (X-\\bar x) = U\\,\\mathrm{diag}(\\lambda)\\,U^\\top`, by the SVD of the centred
    data. X (n, d), one example per row; returns the mean (d,), :math:`U_k` (d, k) and all eigenvalues
    :math:`\\lambda_1\\ge\\dots\\ge\\lambda_d` (d,) (10.1). The rank-k reconstruction is
    :math:`\\bar x + U_kU_k^\\top(x-\\bar x)`, its mean squared error :math:`\\sum_{i>k}\\lambda_i`."""
    X = check_array(X, "X", (None, None))
    n, d = X.shape
    k = check_int(k, "k", 1, d)
    mu = X.mean(axis=0)
    _, s, Vt = np.linalg.svd(X - mu, full_matrices=n < d)  # all d right singular vectors, never an (n, n) U
    lam = np.zeros(d)
    lam[: s.size] = s**2 / n
    return PCAFit(mu, Vt[:k].T, lam)


class LinearAE(NamedTuple):
    C: np.ndarray  # (k, d) encoder, z = C x
    D: np.ndarray  # (d, k) decoder, x_hat = D z
    losses: np.ndarray  # (steps + 1,) the loss before each step and after the last


def linear_ae_loss(X, C, D) -> float:
    """The loss of a linear autoencoder :math:`\\frac1n\\|X - XC^\\top D^\\top\\|_F^2` (X (n, d) centred, one example
    per row; encoder C (k, d), decoder D (d, k)): the mean squared reconstruction error per example (10.1)."""
    X = check_array(X, "X", (None, None))
    d = X.shape[1]
    C = check_array(C, "C", (None, d))
    D = check_array(D, "D", (d, C.shape[0]))
    return float(np.sum((X - X @ C.T @ D.T) ** 2) / len(X))


def train_linear_ae(
    X, k: int, eta: float = 0.5, steps: int = 2000, rng=None, progress: bool = True
) -> LinearAE:
    """A linear autoencoder :math:`\\hat x = DCx` trained by full-batch gradient descent, written as the formula, on
    :math:`L(C,D)=\\frac1n\\|X - XC^\\top D^\\top\\|_F^2=\\mathrm{tr}\\,(I-DC)S(I-DC)^\\top`, :math:`S=\\frac1nX^\\top X`,
    with the gradients :math:`\\nabla_D L=-2(I-DC)SC^\\top`, :math:`\\nabla_C L=-2D^\\top(I-DC)S`, computed
    through S once per step in O(d²k) (the same numbers as from X, without its n rows).

    X (n, d) should be centred (the model has no bias); C (k, d) and D (d, k) start from N(0, 0.1²) entries
    drawn from `rng`. At a global minimum span(D) is the span of the top-k principal directions (10.1)."""
    X = check_array(X, "X", (None, None))
    n, d = X.shape
    k = check_int(k, "k", 1, d)
    eta = check_positive(eta, "eta")
    steps = check_int(steps, "steps", 0)
    rng = check_rng(rng)
    C = 0.1 * rng.standard_normal((k, d))
    D = 0.1 * rng.standard_normal((d, k))
    S = X.T @ X / n
    trace_S = np.trace(S)

    def loss_and_products(C, D):  # L = tr S - 2 tr(D C S) + tr(D C S C^T D^T), and the products it shares
        SCt = S @ C.T  # (d, k)
        CSCt = C @ SCt  # (k, k)
        DtD = D.T @ D
        return trace_S - 2 * np.sum(D * SCt) + np.sum(DtD * CSCt), SCt, CSCt, DtD

    losses = np.empty(steps + 1)
    for step in progress_bar(range(steps), desc="gradient descent", enabled=progress):
        losses[step], SCt, CSCt, DtD = loss_and_products(C, D)
        grad_D = 2 * (D @ CSCt - SCt)  # -2 (I - DC) S C^T
        grad_C = 2 * (DtD @ SCt.T - D.T @ S)  # -2 D^T (I - DC) S
        C, D = C - eta * grad_C, D - eta * grad_D
    losses[steps] = loss_and_products(C, D)[0]
    return LinearAE(C, D, losses)


def _check_fa(X, W, psi, mu) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    X = check_array(X, "X", (None, None))
    d = X.shape[1]
    W = check_array(W, "W", (d, None))
    psi = check_vector(psi, "psi", d)
    if np.any(psi <= 0):
        raise ValueError(f"psi (the diagonal of Psi) must be positive, got minimum {psi.min():.3g}")
    mu = check_vector(mu, "mu", d)
    return X, W, psi, mu


def fa_loglik(X, W, psi, mu) -> float:
    """The log-likelihood :math:`\\sum_i\\log\\mathcal N(x_i;\\mu, WW^\\top+\\Psi)` of factor analysis,
    :math:`x = \\mu + Wz + \\nu`, :math:`z\\sim\\mathcal N(0,I_k)`, :math:`\\nu\\sim\\mathcal N(0,\\Psi)`.
    X (n, d), W (d, k), psi (d,) the diagonal of Ψ, mu (d,); by a Cholesky factor of the covariance (10.1)."""
    X, W, psi, mu = _check_fa(X, W, psi, mu)
    n, d = X.shape
    L = np.linalg.cholesky(W @ W.T + np.diag(psi))
    A = np.linalg.solve(L, (X - mu).T)  # L^{-1} (x_i - mu), column i
    logdet = 2 * np.log(np.diag(L)).sum()
    return float(-0.5 * (n * d * math.log(2 * math.pi) + n * logdet + np.sum(A**2)))


class FAPosterior(NamedTuple):
    mean: np.ndarray  # (n, k) E[z | x_i], one row per example
    cov: np.ndarray  # (k, k) Cov[z | x], the same for every x


def fa_posterior(X, W, psi, mu) -> FAPosterior:
    """The posterior of the latent variable in factor analysis, in the k × k (Woodbury) form:
    :math:`\\Sigma_{z|x}=(I_k+W^\\top\\Psi^{-1}W)^{-1}`, :math:`\\mu_{z|x}=\\Sigma_{z|x}W^\\top\\Psi^{-1}(x-\\mu)`,
    equal to :math:`W^\\top(WW^\\top+\\Psi)^{-1}(x-\\mu)` and :math:`I-W^\\top(WW^\\top+\\Psi)^{-1}W`.
    X (n, d), W (d, k), psi (d,) the diagonal of Ψ, mu (d,) (10.1)."""
    X, W, psi, mu = _check_fa(X, W, psi, mu)
    k = W.shape[1]
    W_scaled = W / psi[:, None]  # Psi^{-1} W
    cov = np.linalg.inv(np.eye(k) + W.T @ W_scaled)
    cov = (cov + cov.T) / 2
    return FAPosterior((X - mu) @ W_scaled @ cov, cov)


class FAFit(NamedTuple):
    mu: np.ndarray  # (d,)
    W: np.ndarray  # (d, k)
    psi: np.ndarray  # (d,) the diagonal of Psi
    logliks: np.ndarray  # (steps + 1,) the log-likelihood before each EM step and after the last


def fa_em(X, k: int, steps: int = 300, rng=None, progress: bool = True) -> FAFit:
    """Factor analysis fitted by EM (Rubin and Thayer, 1982). With S the covariance of X (1/n),
    :math:`G=(I+W^\\top\\Psi^{-1}W)^{-1}` and :math:`B=GW^\\top\\Psi^{-1}` (so :math:`\\mathbb E[z|x]=B(x-\\bar x)`),
    one step is :math:`W\\leftarrow SB^\\top(G+BSB^\\top)^{-1}`, :math:`\\Psi\\leftarrow\\mathrm{diag}(S-WBS)`;
    :math:`\\hat\\mu=\\bar x`. X (n, d); W starts from N(0, 0.1² mean variance) entries drawn from `rng`,
    Ψ from diag(S). The log-likelihood never decreases (10.1)."""
    X = check_array(X, "X", (None, None))
    n, d = X.shape
    k = check_int(k, "k", 1, d)
    steps = check_int(steps, "steps", 0)
    rng = check_rng(rng)
    mu = X.mean(axis=0)
    S = (X - mu).T @ (X - mu) / n
    floor = 1e-8 * max(np.diag(S).mean(), 1e-300)
    W = 0.1 * math.sqrt(np.diag(S).mean()) * rng.standard_normal((d, k))
    psi = np.maximum(np.diag(S).copy(), floor)
    logliks = np.empty(steps + 1)
    for step in progress_bar(range(steps), desc="EM", enabled=progress):
        logliks[step] = fa_loglik(X, W, psi, mu)
        G = np.linalg.inv(np.eye(k) + W.T @ (W / psi[:, None]))
        B = G @ (W / psi[:, None]).T  # (k, d)
        SBt = S @ B.T
        W = SBt @ np.linalg.inv(G + B @ SBt)
        psi = np.maximum(np.diag(S) - np.einsum("ij,ji->i", W, B @ S), floor)
    logliks[steps] = fa_loglik(X, W, psi, mu)
    return FAFit(mu, W, psi, logliks)


class PPCAFit(NamedTuple):
    mu: np.ndarray  # (d,)
    W: np.ndarray  # (d, k) W_ML = U_k (Lambda_k - sigma^2 I)^{1/2}
    sigma2: float  # sigma^2_ML, the mean of the d - k discarded eigenvalues


def ppca_mle(X, k: int, ddof: int = 1) -> PPCAFit:
    """Probabilistic PCA in closed form (Tipping and Bishop, 1999): :math:`x=\\mu+Wz+\\nu`,
    :math:`\\nu\\sim\\mathcal N(0,\\sigma^2I)`; with the eigenvalues :math:`\\lambda_i` and eigenvectors of the
    covariance of X, :math:`\\sigma^2_{ML}=\\frac1{d-k}\\sum_{i>k}\\lambda_i` and
    :math:`W_{ML}=U_k(\\Lambda_k-\\sigma^2I)^{1/2}` (up to a rotation :math:`W_{ML}Q`). X (n, d), 1 ≤ k < d.
    ``ddof=1`` uses the covariance with 1/(n−1), as scikit-learn's PCA; ``ddof=0`` (1/n) is the exact
    maximiser of the likelihood (10.1)."""
    X = check_array(X, "X", (None, None))
    n, d = X.shape
    k = check_int(k, "k", 1, d - 1)
    ddof = check_int(ddof, "ddof", 0, 1)
    if n - ddof < 1:
        raise ValueError(f"X must have more than ddof = {ddof} rows, got {n}")
    fit = pca(X, k)
    lam = fit.lam * n / (n - ddof)
    sigma2 = float(lam[k:].mean())
    W = fit.U_k * np.sqrt(np.maximum(lam[:k] - sigma2, 0.0))
    return PPCAFit(fit.mu, W, sigma2)
