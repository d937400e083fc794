"""Section 9.4, notebook ``06_learning_theory``: statistical learning theory, PAC, VC and Rademacher.

The generalisation gap of a trained MLP against the training-set size, Hoeffding's epsilon and the exact binomial
tail, growth functions of thresholds and intervals, Sauer's lemma and the VC bound, and empirical Rademacher
complexities (Monte Carlo for a norm ball, exact for a finite class, Massart's bound).
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np
import torch
from scipy.special import gammaln, logsumexp
from scipy.stats import binom
from sklearn.datasets import make_moons
from torch import nn

from ..training import (
    device,
    progress_bar,
    to_numpy,
    train_steps,
)
from ..validation import (
    check_choice,
    check_int,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)
from .common import (
    _binary_cross_entropy,
    _relu_mlp,
)


class GapCurve(NamedTuple):
    ns: np.ndarray  # training-set sizes (k,)
    train_error: np.ndarray  # 0-1 error on the training set, the empirical risk R_hat, (k, repeats)
    test_error: np.ndarray  # 0-1 error on the fresh test set, the estimate of the risk R, (k, repeats)


def generalisation_gap_curve(
    ns,
    repeats: int = 1,
    *,
    hidden: int = 64,
    steps: int = 400,
    lr: float = 2e-2,
    noise: float = 0.3,
    n_test: int = 20_000,
    rng=None,
    progress: bool = True,
) -> GapCurve:
    """Empirical risk and risk of an MLP trained on ``make_moons(n, noise)`` for every training-set size n in
    `ns`: the generalisation gap :math:`R(f_S) - \\hat R(f_S)` of the 0-1 loss, section 9.4.

    For each n and each of `repeats` training sets S, a one-hidden-layer ReLU network (2-`hidden`-1, on
    `training.device()`) is trained by full-batch Adam (``torch.optim.Adam``, step `lr`) for `steps` steps of
    `training.train_steps` on the binary cross-entropy;
    :math:`\\hat R` is its error on S, :math:`R` is estimated by its error on `n_test` fresh points of the same
    distribution (one test set for all n). Data and initial weights come from `rng`. Returns a `GapCurve`
    (errors of shape (len(ns), repeats)).
    """
    ns = np.array([check_int(n, "ns entries", 2) for n in np.atleast_1d(ns)])
    repeats, hidden, steps = (
        check_int(repeats, "repeats", 1),
        check_int(hidden, "hidden", 1),
        check_int(steps, "steps", 1),
    )
    lr = check_positive(lr, "lr")
    noise = check_number(noise, "noise", 0)
    n_test = check_int(n_test, "n_test", 1)
    rng = check_rng(rng)

    def moons(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        X, y = make_moons(n, noise=noise, random_state=int(rng.integers(2**31)))
        return (
            torch.as_tensor(X, dtype=torch.float32, device=device()),
            torch.as_tensor(y, dtype=torch.float32, device=device()),
        )

    def error(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
        with torch.no_grad():
            return float(to_numpy(((model(X).squeeze(-1) > 0).float() != y).float().mean()))

    X_test, y_test = moons(n_test)
    train_error, test_error = np.empty((len(ns), repeats)), np.empty((len(ns), repeats))
    runs = [(i, r) for i in range(len(ns)) for r in range(repeats)]
    for i, r in progress_bar(runs, desc="training sets", enabled=progress):
        X, y = moons(int(ns[i]))
        model = _relu_mlp(2, hidden, 1, int(rng.integers(2**31)))
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        train_steps(model, _binary_cross_entropy, optimizer, itertools.repeat((X, y)), steps, progress=False)
        train_error[i, r], test_error[i, r] = error(model, X, y), error(model, X_test, y_test)
    return GapCurve(ns, train_error, test_error)


def hoeffding_epsilon(n: int, delta: float, class_size: int = 1) -> float:
    """The accuracy of a PAC statement from Hoeffding's inequality (and the union bound), section 9.4:

    .. math:: \\varepsilon = \\sqrt{\\frac{\\ln(|\\mathcal F|/\\delta)}{2n}}

    With probability at least 1 - δ over n i.i.d. examples, :math:`R(f) - \\hat R(f) \\le \\varepsilon` for one
    fixed f (``class_size=1``) or for all f of a finite class of `class_size` predictors at once; the loss lies in
    [0, 1]. `n` >= 1, δ in (0, 1), `class_size` an int >= 1 (a Python int may be huge, e.g. 2**n).
    """
    n = check_int(n, "n", 1)
    delta = check_number(delta, "delta", 0, 1, low_open=True, high_open=True)
    class_size = check_int(class_size, "class_size", 1)
    return math.sqrt((math.log(class_size) + math.log(1 / delta)) / (2 * n))


def violation_probability(n: int, eps: float, p: float = 0.5) -> float:
    """The exact probability :math:`\\mathbb P_S[R - \\hat R > \\varepsilon]` for one fixed predictor whose 0-1 loss
    on an example is Bernoulli(p), section 9.4: then R = p and :math:`n\\hat R = K\\sim\\mathrm{Binomial}(n, p)`, so

    .. math:: \\mathbb P[K < n(p - \\varepsilon)] = F_{\\mathrm{Bin}(n,p)}(\\lceil n(p-\\varepsilon)\\rceil - 1)

    (``scipy.stats.binom.cdf``). p = 1/2 has the largest variance, Hoeffding's worst case. Returns a float.
    """
    n = check_int(n, "n", 1)
    eps = check_number(eps, "eps", 0)
    p = check_number(p, "p", 0, 1)
    return float(binom.cdf(math.ceil(n * (p - eps)) - 1, n, p))


def dichotomies_1d(x, kind: str = "threshold") -> np.ndarray:
    """The distinct labelings (+1/-1) that a class of predictors on the real line realises on the points x (n,),
    section 9.4: thresholds :math:`h_t(x) = +1` iff :math:`x > t` (``kind="threshold"``, VC dimension 1) or
    intervals :math:`h_{a,b}(x) = +1` iff :math:`a < x < b` (``kind="interval"``, VC dimension 2).

    Brute force: only the position of t (or of a and b) between the sorted distinct points matters, so the
    candidates are the midpoints and :math:`\\pm\\infty`. Returns the unique labelings as rows, (k, n); the growth
    function on x is k.
    """
    x = check_vector(x, "x")
    kind = check_choice(kind, "kind", ("threshold", "interval"))
    values = np.unique(x)
    cuts = np.concatenate([[-np.inf], (values[:-1] + values[1:]) / 2, [np.inf]])
    if kind == "threshold":
        patterns = np.where(x[None, :] > cuts[:, None], 1, -1)
    else:
        a, b = np.triu_indices(len(cuts))  # a <= b; a == b is the empty interval (everything -1)
        inside = (x[None, :] > cuts[a, None]) & (x[None, :] < cuts[b, None])
        patterns = np.where(inside, 1, -1)
    return np.unique(patterns, axis=0)


def sauer_bound(n: int, vc: int) -> int:
    """Sauer's lemma, section 9.4: a class of VC dimension `vc` realises at most
    :math:`\\mathcal F(n) \\le \\sum_{i=0}^{\\mathrm{VC}}\\binom ni` labelings of n points (= 2^n when VC >= n).
    Returns the exact (Python) integer."""
    n, vc = check_int(n, "n", 0), check_int(vc, "vc", 0)
    if vc >= n:
        return 2**n
    return sum(math.comb(n, i) for i in range(vc + 1))


def log_vc_bound(n: int, vc: int, eps: float) -> float:
    """The natural logarithm of the right-hand side of the VC inequality, section 9.4,

    .. math:: \\mathbb P\\big(\\sup_{f}|\\hat R(f) - R(f)| > \\varepsilon\\big) \\le 8\\,\\mathcal F(n)\\,e^{-n\\varepsilon^2/32},

    with the growth function bounded by Sauer's lemma (`sauer_bound`; 2^n when VC >= n). Computed in log space,
    :math:`\\ln 8 + \\ln\\mathcal F(n) - n\\varepsilon^2/32`, because :math:`\\mathcal F(n)` overflows a float
    long before the bound becomes interesting (for VC > 100 the binomials are summed in log space too). The bound
    is vacuous when the result is >= 0 (a probability bound >= 1). Returns a float.
    """
    n, vc = check_int(n, "n", 1), check_int(vc, "vc", 0)
    eps = check_number(eps, "eps", 0, low_open=True)
    if vc >= n:
        log_growth = n * math.log(2)
    elif vc <= 100:
        log_growth = math.log(sauer_bound(n, vc))
    else:  # exact integers with thousands of digits would be slow
        i = np.arange(vc + 1)
        log_growth = float(logsumexp(gammaln(n + 1) - gammaln(i + 1) - gammaln(n - i + 1)))
    return math.log(8) + log_growth - n * eps**2 / 32


class MonteCarlo(NamedTuple):
    mean: float  # the Monte-Carlo average
    stderr: float  # its standard error, std / sqrt(samples)


def rademacher_linear(X, B: float = 1.0, n_mc: int = 4000, rng=None) -> MonteCarlo:
    """Monte-Carlo estimate of the empirical Rademacher complexity of the norm ball
    :math:`\\{x\\mapsto w^\\top x : \\lVert w\\rVert\\le B\\}` on the rows of X (n, d), section 9.4. The supremum is
    attained at :math:`w = B\\,v/\\lVert v\\rVert`, :math:`v = \\sum_i\\sigma_ix_i` (Cauchy-Schwarz), so

    .. math:: \\hat{\\mathcal R}_S = \\mathbb E_\\sigma\\frac Bn\\Big\\lVert\\sum_{i=1}^n\\sigma_ix_i\\Big\\rVert ,

    averaged over `n_mc` draws of n random signs from `rng`. Returns a `MonteCarlo` (mean, standard error).
    """
    X = check_matrix(X, "X")
    B = check_positive(B, "B")
    n_mc = check_int(n_mc, "n_mc", 2)
    rng = check_rng(rng)
    signs = rng.choice([-1.0, 1.0], size=(n_mc, len(X)))
    values = B * np.linalg.norm(signs @ X, axis=1) / len(X)
    return MonteCarlo(float(values.mean()), float(values.std(ddof=1) / math.sqrt(n_mc)))


def rademacher_exact(A) -> float:
    """The empirical Rademacher complexity of a finite class, exactly, section 9.4: the rows of A (k, n) are the
    vectors :math:`a = (f(x_1), \\dots, f(x_n))` of the k predictors, and

    .. math:: \\hat{\\mathcal R}_S = \\frac1{2^n}\\sum_{\\sigma\\in\\{\\pm1\\}^n}\\max_{a}\\frac1n\\sum_i\\sigma_ia_i ,

    an average over all 2^n sign vectors (so n <= 20). Returns a float.
    """
    A = check_matrix(A, "A")
    n = A.shape[1]
    if n > 20:
        raise ValueError(f"A must have at most 20 columns (2^n sign vectors are enumerated), got {n}")
    total = 0.0
    for start in range(0, 2**n, 2**14):  # the sign vectors in chunks, so that memory stays small
        codes = np.arange(start, min(start + 2**14, 2**n))
        signs = np.where((codes[:, None] >> np.arange(n)) & 1, 1.0, -1.0)
        total += (signs @ A.T).max(axis=1).sum()
    return float(total / (2**n * n))


def massart_bound(A) -> float:
    """Massart's lemma, section 9.4: for a finite set of k vectors, the rows of A (k, n),

    .. math:: \\hat{\\mathcal R}_S \\le \\frac{\\max_a\\lVert a\\rVert\\sqrt{2\\ln k}}{n} .

    For k labelings in {±1}^n this is :math:`\\sqrt{2\\ln k/n}`. Returns a float.
    """
    A = check_matrix(A, "A")
    return float(np.linalg.norm(A, axis=1).max() * math.sqrt(2 * math.log(len(A))) / A.shape[1])
