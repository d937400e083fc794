"""Chapter 01 — connectionism: threshold units, the perceptron, Cover's theorem, Hopfield networks.

Notation of the lecture: a threshold unit computes ``f[w, b](x) = sgn(w^T x + b)``
with ``sgn(0) = +1``; data sets are ``X`` (s, n) with labels ``y`` in {-1, +1}^s;
Hopfield states are ``x`` in {-1, +1}^n with weights ``W`` (n, n), thresholds ``b`` (n,).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from math import comb
from typing import NamedTuple

import numpy as np
import scipy.optimize

from .validation import (
    check_array,
    check_choice,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)

# ----------------------------------------------------------------------------- validation


def _signs(y, s: int, name: str = "y") -> np.ndarray:
    return check_labels(y, name, s, values=(-1, 1)).astype(np.float64)


def _spins(x, n: int | None = None, name: str = "x") -> np.ndarray:
    """Hopfield states in {-1, +1}: one (n,) or a batch (m, n)."""
    x = check_array(x, name)
    if x.ndim not in (1, 2) or (n is not None and x.shape[-1] != n) or not np.isin(x, (-1, 1)).all():
        size = "n" if n is None else n
        raise ValueError(
            f"{name} must hold states in {{-1, +1}} of shape ({size},) or (m, {size}), got shape {x.shape}"
        )
    return x


def _weights(W) -> np.ndarray:
    W = check_matrix(W, "W")
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"W must be a square matrix (n, n), got shape {W.shape}")
    return W


# ----------------------------------------------------------------------------- 1.0 background


def sgn(z) -> np.ndarray:
    """The sign with ``sgn(0) = +1``, so a threshold unit never outputs 0 (unlike ``np.sign``)."""
    z = np.asarray(z)
    if not np.issubdtype(z.dtype, np.number) or np.issubdtype(z.dtype, np.complexfloating):
        raise TypeError(f"z must be real numbers, got dtype {z.dtype}")
    return np.where(z >= 0, 1, -1)


def signed_distance(X, w, b: float) -> np.ndarray:
    """Signed distance ``(w^T x + b) / ||w||`` of each row of `X` (s, n) to ``{x : w^T x + b = 0}``."""
    X = check_matrix(X, "X")
    w = check_vector(w, "w", X.shape[1])
    norm = np.linalg.norm(w)
    if norm == 0:
        raise ValueError("w must be non-zero: w = 0 defines no hyperplane")
    return (X @ w + b) / norm


def project_onto_hyperplane(X, w, b: float) -> np.ndarray:
    """Orthogonal projection ``x - (w^T x + b) w / ||w||^2`` of each row of `X` onto ``w^T x + b = 0``."""
    X = check_matrix(X, "X")
    w = check_vector(w, "w", X.shape[1])
    return X - np.outer(signed_distance(X, w, b), w / np.linalg.norm(w))


def in_general_position(X, tol: float = 1e-9) -> bool:
    """True if every subset of at most n of the s points (rows of `X`, shape (s, n)) is linearly independent.

    It suffices to test the subsets of size ``min(s, n)``: subsets of independent sets are independent.
    """
    X = check_matrix(X, "X")
    s, n = X.shape
    k = min(s, n)
    return all(
        np.linalg.matrix_rank(X[list(idx)], tol=tol) == k for idx in itertools.combinations(range(s), k)
    )


# ----------------------------------------------------------------------------- 1.1 history


def mp_neuron(x, sigma, theta: float) -> np.ndarray:
    """McCulloch–Pitts unit ``1{sigma^T x >= theta}`` for binary inputs `x` (n,) or (m, n), ``sigma`` in {-1,1}^n."""
    sigma = check_labels(sigma, "sigma", values=(-1, 1))
    x = check_array(x, "x")
    if x.ndim not in (1, 2) or x.shape[-1] != len(sigma) or not np.isin(x, (0, 1)).all():
        raise ValueError(
            f"x must be binary (0/1) of shape ({len(sigma)},) or (m, {len(sigma)}), got {x.shape}"
        )
    return (x @ sigma >= theta).astype(np.int64)


def delta_rule(W, X, T, A, eta: float) -> np.ndarray:
    """Full-batch delta (LMS) rule ``W + eta * mean_k (t_k - a_k) x_k^T`` for inputs X (s, n), targets T and
    activations A (s, m), weights W (m, n)."""
    X = check_matrix(X, "X")
    T = check_matrix(T, "T", len(X))
    A = check_matrix(A, "A", *T.shape)
    W = check_matrix(W, "W", T.shape[1], X.shape[1])
    return W + check_positive(eta, "eta") * (T - A).T @ X / len(X)


@dataclass
class PDPNetwork:
    """A parallel-distributed-processing model with one attribute per ingredient (Rumelhart et al., 1986).

    Input units are clamped to the environment's patterns (with a constant bias unit appended);
    output units receive ``net = W o`` and take the activation ``a = F(net)``.
    """

    W: np.ndarray  # 3. pattern of connectivity: W[j, i] is the weight from input unit i to output unit j
    environment: tuple[np.ndarray, np.ndarray]  # 7. input patterns X (m, n_in) and targets T (m, n_out)
    output_function: Callable = lambda a: a  # 2. what a unit sends on: o = f(a)
    propagation_rule: Callable = lambda W, o: o @ W.T  # 4. net input of each unit
    activation_function: Callable = lambda net: net  # 5. new activation a = F(net)
    learning_rule: Callable = delta_rule  # 6. how experience changes the connectivity
    activations: np.ndarray = field(init=False, default=None)  # 1. the units' activation states

    def inputs(self) -> np.ndarray:
        X, _ = self.environment
        return np.hstack([X, np.ones((len(X), 1))])  # bias unit, always on

    def forward(self) -> np.ndarray:
        net = self.propagation_rule(self.W, self.output_function(self.inputs()))
        self.activations = self.activation_function(net)
        return self.activations

    def squared_error(self) -> float:
        return 0.5 * float(np.sum((self.environment[1] - self.forward()) ** 2))

    def learn(self, eta: float) -> None:
        A = self.forward()
        self.W = self.learning_rule(self.W, self.inputs(), self.environment[1], A, eta)


# ----------------------------------------------------------------------------- 1.2 perceptron


class SeparableData(NamedTuple):
    X: np.ndarray  # (n_points, dim)
    y: np.ndarray  # labels in {-1, +1}
    w_star: np.ndarray  # the unit normal of the separating hyperplane through the origin


def make_separable(n_points: int, dim: int, margin: float, rng=None) -> SeparableData:
    """Gaussian points in R^dim labelled by a random unit ``w_star``, keeping only ``|w_star^T x| >= margin``:
    separable through the origin with margin at least `margin`."""
    n_points, dim = check_int(n_points, "n_points", 1), check_int(dim, "dim", 1)
    margin = check_number(margin, "margin", 0, 2, high_open=True)  # in units of the data's std
    rng = check_rng(rng)
    w_star = rng.normal(size=dim)
    w_star /= np.linalg.norm(w_star)
    X = np.empty((0, dim))
    while len(X) < n_points:
        Z = rng.normal(size=(2 * n_points, dim))
        X = np.vstack([X, Z[np.abs(Z @ w_star) >= margin]])
    X = X[:n_points]
    return SeparableData(X, sgn(X @ w_star), w_star)


class PerceptronResult(NamedTuple):
    w: np.ndarray
    b: float
    n_updates: int
    history: dict  # "w": (n_updates+1, n) and "b": (n_updates+1,) after each update; "mistakes" per epoch


def perceptron_train(X, y, max_epochs: int = 100, bias: bool = True, w0=None) -> PerceptronResult:
    """Rosenblatt's perceptron: on a mistake ``sgn(w^T x + b) != y`` update ``w += y x``, ``b += y``.

    Sweeps the data in order until an epoch without mistakes or `max_epochs`.
    With ``bias=False`` the bias stays 0 (a homogeneous separator).
    """
    X = check_matrix(X, "X")
    y = _signs(y, len(X))
    max_epochs = check_int(max_epochs, "max_epochs", 1)
    w = np.zeros(X.shape[1]) if w0 is None else check_vector(w0, "w0", X.shape[1])
    b = 0.0
    ws, bs, mistakes = [w.copy()], [b], []
    for _ in range(max_epochs):
        n_mistakes = 0
        for x_i, y_i in zip(X, y, strict=True):
            if sgn(w @ x_i + b) != y_i:
                w += y_i * x_i
                b += y_i if bias else 0.0
                ws.append(w.copy())
                bs.append(b)
                n_mistakes += 1
        mistakes.append(n_mistakes)
        if n_mistakes == 0:
            break
    history = {"w": np.array(ws), "b": np.array(bs), "mistakes": mistakes}
    return PerceptronResult(w, b, len(ws) - 1, history)


def geometric_margin(X, y, w, b: float) -> float:
    """Margin of the data set, ``min_i y_i (w^T x_i + b) / ||w||``; positive iff (w, b) separates it."""
    X = check_matrix(X, "X")
    y = _signs(y, len(X))
    return float(np.min(y * signed_distance(X, w, b)))


def separating_weights(X, y, homogeneous: bool = True, tol: float = 1e-9) -> np.ndarray | None:
    """Weights with ``y_i (w^T x_i + b) >= 1`` for all i, found by linear programming, or None if none exist.

    Returns w (n,) with ``homogeneous=True`` (hyperplanes through the origin), else ``(w, b)`` stacked (n+1,).
    The LP maximises the smallest value ``t`` of ``y_i (w^T x_i + b)`` over the box ``|w|_inf <= 1`` (bounded
    and always feasible, so the solver never has to prove infeasibility); the data are separable iff
    ``t > tol``, and ``w / t`` then reaches 1 everywhere.
    """
    X = check_matrix(X, "X")
    y = _signs(y, len(X))
    if not homogeneous:
        X = np.hstack([X, np.ones((len(X), 1))])
    d = X.shape[1]
    # variables (w, t): minimise -t subject to t - y_i w^T x_i <= 0
    res = scipy.optimize.linprog(
        np.append(np.zeros(d), -1.0),
        A_ub=np.hstack([-(y[:, None] * X), np.ones((len(X), 1))]),
        b_ub=np.zeros(len(X)),
        bounds=[(-1.0, 1.0)] * d + [(None, 1.0)],
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"linprog failed: {res.message}")
    t = -res.fun
    return res.x[:d] / t if t > tol else None


def is_linearly_separable(X, y, homogeneous: bool = True) -> bool:
    """Is there (w, b) with ``y_i (w^T x_i + b) > 0`` for all i? ``homogeneous=True`` fixes ``b = 0``."""
    return separating_weights(X, y, homogeneous) is not None


class Hyperplane(NamedTuple):
    w: np.ndarray  # normal vector (n,)
    b: float  # offset: the hyperplane is w^T x + b = 0


def max_margin_classifier(X, y) -> Hyperplane:
    """Hard-margin SVM: ``min ||w||^2 / 2`` s.t. ``y_i (w^T x_i + b) >= 1``; its margin is ``1/||w||``."""
    X = check_matrix(X, "X")
    y = _signs(y, len(X))
    if not is_linearly_separable(X, y, homogeneous=False):
        raise ValueError("X, y must be linearly separable for a hard-margin classifier")
    n = X.shape[1]
    Xb = np.hstack([X, np.ones((len(X), 1))])
    res = scipy.optimize.minimize(
        lambda v: 0.5 * v[:n] @ v[:n],
        x0=np.zeros(n + 1),
        jac=lambda v: np.append(v[:n], 0.0),
        constraints={"type": "ineq", "fun": lambda v: y * (Xb @ v) - 1, "jac": lambda v: y[:, None] * Xb},
        method="SLSQP",
        options={"ftol": 1e-12, "maxiter": 500},
    )
    if not res.success:
        raise RuntimeError(f"SLSQP did not converge: {res.message}")
    return Hyperplane(res.x[:n], float(res.x[n]))


def version_space_fraction(X, y, n_angles: int = 3600) -> float:
    """Fraction of unit vectors ``w = (cos t, sin t)`` on a grid of angles with ``y_i w^T x_i > 0`` for all i (2-D, b = 0)."""
    X = check_matrix(X, "X")
    y = _signs(y, len(X))
    if X.shape[1] != 2:
        raise ValueError(f"X must be 2-D data of shape (s, 2), got {X.shape}")
    t = np.linspace(0, 2 * np.pi, check_int(n_angles, "n_angles", 1), endpoint=False)
    W = np.stack([np.cos(t), np.sin(t)], axis=1)
    return float(np.mean(np.all(y * (W @ X.T) > 0, axis=1)))


# ----------------------------------------------------------------------------- 1.4 Cover's theorem


def cover_count(s: int, n: int) -> int:
    """Cover's function count ``C(s, n) = 2 sum_{i=0}^{n-1} binom(s-1, i)``.

    The number of dichotomies of s >= 1 points in general position in R^n that a hyperplane through
    the origin realises; ``C(s, 0) = 0``, so that ``C(s+1, n) = C(s, n) + C(s, n-1)`` holds for all n >= 1.
    """
    s, n = check_int(s, "s", 1), check_int(n, "n", 0)
    return 2 * sum(comb(s - 1, i) for i in range(n))


def count_dichotomies_bruteforce(X, homogeneous: bool = True) -> int:
    """Count the labelings y in {-1,+1}^s of the rows of `X` that are linearly separable, by LP.

    y is separable iff -y is, so only labelings with ``y_0 = +1`` are solved and the count doubled.
    """
    X = check_matrix(X, "X")
    count = 0
    for rest in itertools.product((-1, 1), repeat=len(X) - 1):
        count += is_linearly_separable(X, np.array((1, *rest)), homogeneous=homogeneous)
    return 2 * count


# ----------------------------------------------------------------------------- 1.5 Hopfield networks


def hopfield_hebbian(patterns) -> np.ndarray:
    """Hebbian weights ``W = (1/n) (sum_t x^t x^t^T - s I)``: outer products with the diagonal set to 0."""
    P = _spins(patterns, name="patterns")
    P = np.atleast_2d(P)
    s, n = P.shape
    return (P.T @ P - s * np.eye(n)) / n


def hopfield_energy(x, W, b=None) -> np.ndarray:
    """Energy ``E(x) = -1/2 x^T W x + b^T x`` of a state (n,) or of each row of a batch (m, n)."""
    W = _weights(W)
    n = len(W)
    x = _spins(x, n)
    b = np.zeros(n) if b is None else check_vector(b, "b", n)
    return -0.5 * np.einsum("...i,ij,...j->...", x, W, x) + x @ b


TIE = 1e-10  # a local field this close to 0 is a tie: Hebbian fields are multiples of 1/n, summed with rounding error


def _threshold(field) -> np.ndarray:
    """``sgn(field)`` with ``sgn(0) = +1``, where a field within `TIE` of 0 counts as 0 (-2.8e-17 is a tie, not -1)."""
    field = np.asarray(field, dtype=np.float64)
    return sgn(np.where(np.abs(field) <= TIE, 0.0, field)).astype(np.float64)


def hopfield_is_fixed_point(x, W, b=None) -> np.ndarray:
    """True where ``sgn(W x - b) = x``: the state (or each row of a batch) is stable under every update."""
    W = _weights(W)
    n = len(W)
    x = _spins(x, n)
    b = np.zeros(n) if b is None else check_vector(b, "b", n)
    return np.all(_threshold(x @ W.T - b) == x, axis=-1)


class HopfieldRun(NamedTuple):
    x: np.ndarray  # the final state (n,)
    # x0, then the state after every update (async: every single-unit update; sync: every step)
    states: np.ndarray
    energies: np.ndarray  # E of each of `states`, computed from the states with hopfield_energy


def hopfield_run(x0, W, b=None, mode: str = "async", max_sweeps: int = 100, rng=None) -> HopfieldRun:
    """Run Hopfield dynamics from `x0` (n,) until a fixed point or `max_sweeps`.

    ``mode="async"``: one unit at a time, in a random order each sweep, ``x_i <- sgn(sum_j w_ij x_j - b_i)``;
    `states` holds the state after every single-unit update. ``mode="sync"``: all units at once,
    ``x <- sgn(W x - b)``; `states` holds the state after every step (it can oscillate in a 2-cycle).
    The energies are computed from the recorded states, not from the update rule, so that they can show
    whether the rule really descends the energy.
    """
    W = _weights(W)
    n = len(W)
    if not np.allclose(W, W.T) or np.any(np.diag(W) != 0):
        raise ValueError(
            "W must be symmetric with zero diagonal: only then do the dynamics descend the energy"
        )
    x = _spins(x0, n, "x0")
    if x.ndim != 1:
        raise ValueError(f"x0 must be a single state of shape ({n},), got {x.shape}")
    b = np.zeros(n) if b is None else check_vector(b, "b", n)
    mode = check_choice(mode, "mode", ("async", "sync"))
    max_sweeps = check_int(max_sweeps, "max_sweeps", 1)
    rng = check_rng(rng)
    states = [x.copy()]
    for _ in range(max_sweeps):
        if mode == "sync":
            x_new = _threshold(W @ x - b)
            changed = not np.array_equal(x_new, x)
            x = x_new
            states.append(x.copy())
        else:
            changed = False
            for i in rng.permutation(n):
                x_i = _threshold(W[i] @ x - b[i])
                changed |= x_i != x[i]
                x[i] = x_i
                states.append(x.copy())
        if not changed:
            break
    states = np.array(states)
    return HopfieldRun(x, states, hopfield_energy(states, W, b))


def crosstalk(patterns) -> np.ndarray:
    """Cross-talk ``C^t_i = (1/n) sum_{j != i} sum_{r != t} x^r_i x^r_j x^t_j`` of stored patterns (s, n).

    With Hebbian weights, ``W x^t = (1 - 1/n) x^t + C^t``. Computed through the overlaps
    ``G = P P^T``: ``C^t = (1/n) (sum_{r != t} G_rt x^r - (s - 1) x^t)``.
    """
    P = np.atleast_2d(_spins(patterns, name="patterns"))
    s, n = P.shape
    G = P @ P.T
    np.fill_diagonal(G, 0.0)
    return (G @ P - (s - 1) * P) / n


def flip_bits(x, n_flips: int, rng=None) -> np.ndarray:
    """A copy of the state `x` (n,) with `n_flips` distinct, randomly chosen units flipped."""
    x = _spins(x)
    if x.ndim != 1:
        raise ValueError(f"x must be a single state (n,), got shape {x.shape}")
    n_flips = check_int(n_flips, "n_flips", 0, len(x))
    x[check_rng(rng).choice(len(x), size=n_flips, replace=False)] *= -1
    return x


def recall_rate(patterns, n_flips: int, n_trials: int = 100, rng=None) -> float:
    """Fraction of trials in which a Hebbian network, started from a stored pattern with `n_flips`
    flipped units, runs (asynchronously) back to exactly that pattern. Trials cycle over the patterns."""
    P = np.atleast_2d(_spins(patterns, name="patterns"))
    n_trials = check_int(n_trials, "n_trials", 1)
    rng = check_rng(rng)
    W = hopfield_hebbian(P)
    hits = 0
    for trial in range(n_trials):
        target = P[trial % len(P)]
        x = hopfield_run(flip_bits(target, n_flips, rng), W, rng=rng).x
        hits += np.array_equal(x, target)
    return hits / n_trials


def digit_prototypes(digits=(0, 1, 7)) -> np.ndarray:
    """Binary (+-1) 8×8 prototypes (len(digits), 64) of hand-written digits for a Hopfield network.

    Each prototype is the class mean image, binarised against the mean of that pixel over the
    whole data set: this removes the background that all digits share, so the patterns overlap little.
    """
    from .data import load_digits

    images, labels = load_digits()
    digits = [check_int(d, "digits entries", 0, 9) for d in digits]
    if not digits or len(set(digits)) != len(digits):
        raise ValueError(f"digits must be distinct integers in 0..9, got {digits!r}")
    X = images.reshape(len(images), -1)
    return np.array([sgn(X[labels == d].mean(axis=0) - X.mean(axis=0)) for d in digits], dtype=np.float64)
