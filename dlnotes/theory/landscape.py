"""Section 9.5, notebook ``09_loss_landscape``: the loss landscape.

The second-order test at a critical point, the sharpness by power iteration on Hessian-vector products
(`common.power_iteration`), gradient descent that tracks it (the edge of stability), quadratic Bezier paths
between two minima and their fitted control point (mode connectivity), and magnitude pruning, masked training
and the lottery-ticket experiment; for ``10_spectrum_symmetry`` (9.5 continued): the Lanczos method on
Hessian-vector products (the Hessian's spectrum and its outliers), and the permutation symmetry of hidden units
with weight matching and activation matching by the Hungarian algorithm.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import scipy.optimize
import torch
from torch import nn

from ..training import (
    accuracy,
    evaluate,
    make_loader,
    model_device,
    progress_bar,
    to_numpy,
    train_steps,
)
from ..validation import (
    check_array,
    check_callable,
    check_int,
    check_labels,
    check_matrix,
    check_number,
    check_positive,
    check_rng,
    check_vector,
)
from .common import (
    LossGrad,
    _check_flat,
    _Parameters,
    _relu_mlp,
    hvp,
    power_iteration,
)

CRITICAL_KINDS = ("strict minimum", "strict maximum", "saddle", "inconclusive")


def classify_critical_point(H, tol: float = 1e-8) -> str:
    """The second-order test at a critical point (grad L = 0) from the eigenvalues lambda_i of the Hessian H (P, P):
    all lambda_i > 0 -> ``"strict minimum"``, all < 0 -> ``"strict maximum"``, both signs -> ``"saddle"``;
    otherwise H is singular and semi-definite and the test says nothing: ``"inconclusive"`` (H >= 0 is
    necessary for a minimum, not sufficient). An eigenvalue counts as 0 when |lambda_i| <= tol max(1, max|lambda|).
    H a symmetric numpy array or torch tensor. Section 9.5.
    """
    if isinstance(H, torch.Tensor):
        H = to_numpy(H)
    H = check_matrix(H, "H")
    if H.shape[0] != H.shape[1] or not np.allclose(H, H.T, atol=1e-10 * max(1.0, np.abs(H).max())):
        raise ValueError(f"H must be a symmetric square matrix, got shape {H.shape}")
    tol = check_positive(tol, "tol")
    lams = np.linalg.eigvalsh(H)
    zero = tol * max(1.0, np.abs(lams).max())
    positive, negative = (lams > zero).any(), (lams < -zero).any()
    if positive and negative:
        return "saddle"
    if (lams > zero).all():
        return "strict minimum"
    if (lams < -zero).all():
        return "strict maximum"
    return "inconclusive"


class Sharpness(NamedTuple):
    value: float  # the Rayleigh quotient v^T H v at the last iterate: lambda_max once v has converged
    vector: torch.Tensor  # the last unit iterate v (P,): pass it as v0 to warm-start the next call


def sharpness(
    loss: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, iters: int = 20, v0=None, rng=None
) -> Sharpness:
    """The sharpness lambda_max(H), H = grad^2 L(theta), by `common.power_iteration` on the Hessian-vector
    product `common.hvp`: v <- H v / ||H v||, from v0 (a warm start, e.g. the vector of the previous call) or a
    random unit vector drawn from `rng`; returns v^T H v and v. It converges to the eigenvalue of largest
    modulus, which is lambda_max wherever no negative eigenvalue is larger in size (near a minimum). Section 9.5.
    """
    check_callable(loss, "loss")
    theta = _check_flat(theta).detach()
    iters = check_int(iters, "iters", 1)
    if v0 is not None:
        v0 = _check_flat(v0, "v0").detach()
        if v0.shape != theta.shape:
            raise ValueError(f"v0 must have the shape of theta {tuple(theta.shape)}, got {tuple(v0.shape)}")
        v0 = to_numpy(v0)

    def hessian_times(v: np.ndarray) -> np.ndarray:
        return to_numpy(hvp(loss, theta, torch.from_numpy(v).to(theta)))

    result = power_iteration(hessian_times, theta.numel(), iters, rng, v0)
    return Sharpness(result.rayleigh, torch.from_numpy(result.vector).to(theta))


class SharpnessRun(NamedTuple):
    theta: np.ndarray  # the last iterate (P,)
    losses: np.ndarray  # the loss before every step (steps,)
    measured_at: np.ndarray  # the steps after which the sharpness was measured
    sharpness: np.ndarray  # lambda_max there


def gd_sharpness(
    loss_grad: Callable[[np.ndarray], LossGrad],
    loss: Callable[[torch.Tensor], torch.Tensor],
    theta0,
    eta: float,
    steps: int,
    every: int = 50,
    iters: int = 3,
    rng=None,
) -> SharpnessRun:
    """Full-batch gradient descent theta <- theta - eta grad L(theta) that records the sharpness lambda_max(H) every
    `every` steps, by `iters` power iterations warm-started from the previous eigenvector (the first measurement
    uses 10 iters from a random vector drawn from `rng`). ``loss_grad(theta)`` returns ``(L, grad L)`` in numpy (e.g.
    `common.tanh_mlp_mse`), ``loss(theta)`` the same loss of a float64 tensor, for `common.hvp`. theta0 (P,). A
    run whose loss stops being finite ends there. Plain gradient descent written as the formula (the object of
    the section), not `training.train_steps`. Section 9.5 (edge of stability).
    """
    check_callable(loss_grad, "loss_grad")
    check_callable(loss, "loss")
    theta = check_vector(theta0, "theta0")
    eta = check_positive(eta, "eta")
    steps = check_int(steps, "steps", 1)
    every = check_int(every, "every", 1)
    iters = check_int(iters, "iters", 1)
    rng = check_rng(rng)
    losses, measured_at, values, vector = [], [], [], None
    with progress_bar(range(1, steps + 1), desc=f"GD, eta = {eta:g}") as bar:
        for step in bar:
            value, grad = loss_grad(theta)
            losses.append(value)
            if not np.isfinite(value):
                break
            theta = theta - eta * grad
            if step % every == 0:
                result = sharpness(
                    loss, torch.from_numpy(theta), iters if vector is not None else 10 * iters, vector, rng
                )
                vector = result.vector
                measured_at.append(step)
                values.append(result.value)
    return SharpnessRun(theta, np.array(losses), np.array(measured_at), np.array(values))


def bezier_point(theta_a, theta_m, theta_b, t):
    """The quadratic Bezier curve from theta_a (t = 0) to theta_b (t = 1) with the control point theta_m,

    .. math:: \\varphi(t) = (1-t)^2\\,\\theta_a + 2t(1-t)\\,\\theta_m + t^2\\,\\theta_b,\\qquad t\\in[0, 1];

    theta_m = (theta_a + theta_b)/2 gives the straight line (1 - t) theta_a + t theta_b. Three vectors (P,), numpy
    arrays or torch tensors (then the result is a tensor, differentiable in theta_m); t a number -> (P,), t (T,)
    -> (T, P). Section 9.5 (mode connectivity).
    """
    points = (theta_a, theta_m, theta_b)
    names = ("theta_a", "theta_m", "theta_b")
    if any(isinstance(p, torch.Tensor) for p in points):
        points = tuple(
            _check_flat(p if isinstance(p, torch.Tensor) else torch.as_tensor(p), name)
            for p, name in zip(points, names, strict=True)
        )
        t = torch.as_tensor(t, dtype=points[0].dtype)
        bad_range = bool(((t < 0) | (t > 1)).any()) or not bool(torch.isfinite(t).all())
    else:
        points = tuple(check_vector(p, name) for p, name in zip(points, names, strict=True))
        t = np.asarray(t, dtype=float)
        bad_range = not np.isfinite(t).all() or bool(((t < 0) | (t > 1)).any())
    if any(p.shape != points[0].shape for p in points):
        raise ValueError(
            f"theta_a, theta_m, theta_b must have one shape, got {[tuple(p.shape) for p in points]}"
        )
    if t.ndim > 1 or bad_range:
        raise ValueError(f"t must be a number or a vector (T,) in [0, 1], got shape {tuple(t.shape)}")
    a, m, b = points
    s = t[..., None] if t.ndim == 1 else t
    return (1 - s) ** 2 * a + 2 * s * (1 - s) * m + s**2 * b


class PathLosses(NamedTuple):
    t: np.ndarray  # the positions on the path (points,)
    loss: np.ndarray  # L there (points,)
    barrier: float  # max_t L - (L(0) + L(1))/2


def path_losses(
    loss: Callable[[torch.Tensor], torch.Tensor], theta_a, theta_b, theta_m=None, points: int = 41
) -> PathLosses:
    """The loss along a path between two parameter vectors theta_a, theta_b (P,) (tensors): the straight line
    (1 - t) theta_a + t theta_b when theta_m is None, else the Bezier curve of `bezier_point`, at `points` evenly
    spaced t in [0, 1], evaluated with ``torch.func.vmap(loss)``. The barrier is max_t L(t) - (L(0) + L(1))/2.
    Section 9.5.
    """
    check_callable(loss, "loss")
    theta_a, theta_b = _check_flat(theta_a, "theta_a").detach(), _check_flat(theta_b, "theta_b").detach()
    theta_m = (theta_a + theta_b) / 2 if theta_m is None else _check_flat(theta_m, "theta_m").detach()
    points = check_int(points, "points", 2)
    ts = torch.linspace(0, 1, points, dtype=theta_a.dtype)
    with torch.no_grad():
        values = to_numpy(torch.func.vmap(loss)(bezier_point(theta_a, theta_m, theta_b, ts)))
    return PathLosses(to_numpy(ts), values, float(values.max() - (values[0] + values[-1]) / 2))


def fit_bezier(
    loss: Callable[[torch.Tensor], torch.Tensor],
    theta_a: torch.Tensor,
    theta_b: torch.Tensor,
    steps: int = 500,
    lr: float = 1e-2,
    samples: int = 16,
    rng=None,
    progress: bool = True,
) -> torch.Tensor:
    """The control point theta_m of a low-loss quadratic Bezier curve between two minima (Garipov et al., 2018):
    minimise the mean loss along the curve, E_{t ~ U[0, 1]} L(phi(t)), over theta_m with Adam (step size lr) by
    `training.train_steps`, from the midpoint (theta_a + theta_b)/2, drawing `samples` values of t per step from
    `rng`. ``loss`` must work under ``torch.func.vmap``; theta_m lives on the device of theta_a. Returns theta_m
    (P,), detached. Section 9.5.
    """
    check_callable(loss, "loss")
    theta_a, theta_b = _check_flat(theta_a, "theta_a").detach(), _check_flat(theta_b, "theta_b").detach()
    if theta_a.shape != theta_b.shape:
        raise ValueError(
            f"theta_a and theta_b must have one shape, got {tuple(theta_a.shape)}, {tuple(theta_b.shape)}"
        )
    steps = check_int(steps, "steps", 1)
    lr = check_positive(lr, "lr")
    samples = check_int(samples, "samples", 1)
    rng = check_rng(rng)
    curve = _Parameters(theta_m=((theta_a + theta_b) / 2).clone())
    optimizer = torch.optim.Adam(curve.parameters(), lr=lr)
    batched = torch.func.vmap(loss)

    def positions():  # t for every step
        while True:
            yield torch.from_numpy(rng.uniform(0, 1, samples)).to(theta_a.dtype)

    def mean_loss(curve: _Parameters, ts: torch.Tensor) -> torch.Tensor:
        return batched(bezier_point(theta_a, curve.theta_m, theta_b, ts)).mean()

    train_steps(
        curve, mean_loss, optimizer, positions(), steps, progress=progress, desc="Bezier control point"
    )
    return curve.theta_m.detach()


def magnitude_mask(w, frac: float) -> np.ndarray:
    """The pruning mask of one layer: 0 for the round(frac * w.size) entries of w with the smallest magnitude |w|
    (ties broken by position), 1 for the others; the shape of w (numpy array or torch tensor). Section 9.5
    (lottery tickets).
    """
    if isinstance(w, torch.Tensor):
        w = to_numpy(w)
    w = check_array(w, "w")
    frac = check_number(frac, "frac", 0, 1)
    pruned = np.argsort(np.abs(w).ravel(), kind="stable")[: round(frac * w.size)]
    mask = np.ones(w.size)
    mask[pruned] = 0.0
    return mask.reshape(w.shape)


def magnitude_prune(model: nn.Module, frac: float) -> dict[str, torch.Tensor]:
    """Layer-wise magnitude pruning: for every weight matrix of `model` (parameters with two or more dimensions;
    biases are kept), the `magnitude_mask` that removes the fraction frac of its smallest-magnitude entries.
    Returns {parameter name: mask tensor (0 or 1) of the parameter's shape}. Section 9.5 (lottery tickets).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    frac = check_number(frac, "frac", 0, 1)
    return {
        name: torch.as_tensor(magnitude_mask(p.detach(), frac), dtype=p.dtype, device=p.device)
        for name, p in model.named_parameters()
        if p.ndim >= 2
    }


def train_masked(
    model: nn.Module,
    masks: dict[str, torch.Tensor] | None,
    X,
    y,
    *,
    epochs: int,
    lr: float,
    batch_size: int = 64,
    rng=None,
    progress: bool = True,
) -> np.ndarray:
    """Train a classifier with some weights pruned: set the masked weights (mask 0) to 0, keep their gradients at
    0 (a hook on each masked parameter), and train with plain SGD (step size lr) on the cross-entropy, `epochs`
    passes over the data by `training.train_steps`, in minibatches of `batch_size` in an order drawn from `rng`
    (the batches taken by index from tensors on the model's device: faster than a DataLoader for small tensors).
    masks = None trains the dense network. X (n, d), integer labels y (n,). The model is changed in place and
    left in the mode it came in; returns the mean training loss per epoch. Section 9.5 (lottery tickets).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    X = check_matrix(X, "X")
    y = check_labels(y, "y", len(X))
    epochs = check_int(epochs, "epochs", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    rng = check_rng(rng)
    params = dict(model.named_parameters())
    masks = masks or {}
    for name, mask in masks.items():
        if name not in params or not isinstance(mask, torch.Tensor) or mask.shape != params[name].shape:
            raise ValueError(f"masks must map parameter names of model to masks of their shape, got {name!r}")
    dev = model_device(model)
    with torch.no_grad():
        for name, mask in masks.items():
            mask = mask.to(dev, params[name].dtype)
            params[name].mul_(mask)
            params[name].register_hook(lambda g, m=mask: g * m)
    Xt = torch.as_tensor(X, dtype=torch.float32, device=dev)
    yt = torch.as_tensor(y, device=dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=check_positive(lr, "lr"))

    def loss(model: nn.Module, idx: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(model(Xt[idx]), yt[idx])

    history = np.empty(epochs)
    for epoch in progress_bar(range(epochs), desc="epochs (masked SGD)", enabled=progress):
        batches = torch.as_tensor(rng.permutation(len(X)), device=dev).split(batch_size)
        losses = train_steps(model, loss, optimizer, batches, progress=False)
        history[epoch] = sum(value * len(batch) for value, batch in zip(losses, batches, strict=True)) / len(
            X
        )
    return history


class LotteryTrial(NamedTuple):
    dense: float  # test accuracy of the dense network
    ticket: np.ndarray  # per pruning fraction: the mask applied to the rewound initial weights, retrained
    fresh: np.ndarray  # per pruning fraction: the same mask on a fresh initialisation, retrained


def lottery_ticket_trial(
    split,
    fracs=(0.8, 0.95),
    *,
    hidden: int = 100,
    epochs: int = 15,
    lr: float = 0.15,
    batch_size: int = 64,
    rng=None,
) -> LotteryTrial:
    """One lottery-ticket experiment (Frankle and Carbin, 2019) on a data split (X_train, X_test, y_train, y_test):
    train a 64-hidden-10 ReLU network from its initialisation theta_0; for every fraction in `fracs`, prune it
    one-shot and layer-wise by magnitude (`magnitude_prune`), rewind the surviving weights to theta_0 and retrain
    with the same schedule (`train_masked`: torch.optim.SGD with step size lr, epochs, batch_size, the same batch
    order); the control trains the same mask from a fresh initialisation. Test accuracies; seeds drawn from `rng`.
    Section 9.5.
    """
    fracs = [check_number(f, "fracs", 0, 1) for f in np.atleast_1d(fracs)]
    hidden = check_int(hidden, "hidden", 1)
    rng = check_rng(rng)
    X_train, X_test, y_train, y_test = split
    init_seed, fresh_seed, order_seed = (int(s) for s in rng.integers(2**31, size=3))
    test_loader = make_loader(X_test, y_test, batch_size=len(X_test), shuffle=False)

    def trained(seed: int, masks) -> tuple[nn.Module, float]:
        model = _relu_mlp(64, hidden, 10, seed)
        train_masked(
            model, masks, X_train, y_train, epochs=epochs, lr=lr, batch_size=batch_size, rng=order_seed,
            progress=False,
        )  # fmt: skip
        return model, evaluate(model, test_loader, {"accuracy": accuracy})["accuracy"]

    dense_model, dense = trained(init_seed, None)
    ticket, fresh = [], []
    for frac in fracs:
        masks = magnitude_prune(dense_model, frac)
        ticket.append(trained(init_seed, masks)[1])
        fresh.append(trained(fresh_seed, masks)[1])
    return LotteryTrial(dense, np.array(ticket), np.array(fresh))


# ----------------------------------------------------------------------------- 9.5 (continued) the Hessian's spectrum


class Lanczos(NamedTuple):
    ritz: np.ndarray  # the eigenvalues of the tridiagonal T (k,), ascending: approximations of A's
    weights: np.ndarray  # squared first components of T's eigenvectors (k,), sum 1: quadrature weights
    alpha: np.ndarray  # the diagonal of T (k,)
    beta: np.ndarray  # its off-diagonal (k - 1,)


def lanczos(
    matvec: Callable[[np.ndarray], np.ndarray], dim: int, steps: int = 80, rng=None, v0=None
) -> Lanczos:
    """The Lanczos method for a symmetric linear map given only through ``matvec(v) = A v`` (e.g. a
    Hessian-vector product): from a unit start vector q_1 (`v0`, or drawn from `rng`) build an orthonormal basis
    Q = [q_1 .. q_k] of the Krylov space span{q_1, A q_1, .., A^{k-1} q_1} in which A is tridiagonal,

    .. math:: A q_j = \\beta_{j-1} q_{j-1} + \\alpha_j q_j + \\beta_j q_{j+1},\\qquad T = Q^\\top A Q,

    re-orthogonalising every new vector against all earlier ones (in floating point the three-term recursion
    alone loses orthogonality and repeats converged eigenvalues). The eigenvalues of T (Ritz values) approximate
    A's; the extreme ones converge first, after far fewer than `dim` products. The squared first components
    tau_i^2 of T's eigenvectors are the weights of Gauss quadrature for the spectral measure of A seen from q_1:
    sum_i tau_i^2 delta(lambda - theta_i) estimates the eigenvalue density (stochastic Lanczos quadrature). Stops
    early when the Krylov space is invariant (beta_j = 0: then the Ritz values are exact). Section 9.5 (continued).
    """
    check_callable(matvec, "matvec")
    dim = check_int(dim, "dim", 1)
    steps = check_int(steps, "steps", 1)
    rng = check_rng(rng)
    steps = min(steps, dim)
    if v0 is None:
        q = rng.standard_normal(dim)
    else:
        q = check_vector(v0, "v0", dim).copy()
        if not q.any():
            raise ValueError("v0 must be a non-zero vector (the start of the iteration)")
    Q = np.zeros((steps, dim))
    Q[0] = q / np.linalg.norm(q)
    alpha, beta = np.zeros(steps), np.zeros(steps)
    k = steps
    for j in range(steps):
        w = np.asarray(matvec(Q[j]), dtype=float)
        if w.shape != (dim,):
            raise ValueError(f"matvec must return a vector of shape ({dim},), got shape {w.shape}")
        alpha[j] = Q[j] @ w
        for _ in range(2):  # full re-orthogonalisation, twice ("twice is enough")
            w -= Q[: j + 1].T @ (Q[: j + 1] @ w)
        beta[j] = np.linalg.norm(w)
        if j + 1 == steps:
            break
        if beta[j] <= 1e-12 * max(1.0, np.abs(alpha[: j + 1]).max()):  # an invariant subspace: T is exact
            k = j + 1
            break
        Q[j + 1] = w / beta[j]
    alpha, beta = alpha[:k], beta[: k - 1]
    T = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
    ritz, S = np.linalg.eigh(T)
    return Lanczos(ritz, S[0] ** 2, alpha, beta)


def hessian_spectrum(
    loss: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, steps: int = 80, rng=None
) -> Lanczos:
    """`lanczos` on the Hessian H = grad^2 L(theta) of a scalar function of a flat vector theta (P,), through the
    Hessian-vector product `common.hvp` (two backward passes each, never the P x P matrix): the Ritz values
    approximate H's eigenvalues, the largest ones first. Use float64. Section 9.5 (continued)."""
    check_callable(loss, "loss")
    theta = _check_flat(theta).detach()

    def hessian_times(v: np.ndarray) -> np.ndarray:
        return to_numpy(hvp(loss, theta, torch.from_numpy(v).to(theta)))

    return lanczos(hessian_times, theta.numel(), steps, rng)


class Outliers(NamedTuple):
    count: int  # k*: the number of eigenvalues above the largest gap among the top ones
    gap: float  # lambda_{k*} / lambda_{k*+1}, the size of that gap
    ratios: np.ndarray  # lambda_k / lambda_{k+1} for k = 1..top - 1


def count_outliers(eigenvalues, top: int = 30, start: int = 1) -> Outliers:
    """The outliers of a spectrum, defined by its largest gap: sort the eigenvalues in decreasing order,
    lambda_1 >= lambda_2 >= ..., and return k* = argmax_{start <= k < top} lambda_k / lambda_{k+1} and that ratio
    (``start=2`` ignores a gap between lambda_1 and the rest, for spectra whose top eigenvalue stands apart by
    itself). The `top` largest eigenvalues must be positive. A spectrum without outliers decays smoothly (all
    ratios near 1); one with k outliers has a large ratio at k. Section 9.5 (continued)."""
    lams = np.sort(check_vector(eigenvalues, "eigenvalues"))[::-1]
    top = check_int(top, "top", 2, len(lams))
    start = check_int(start, "start", 1, top - 1)
    if lams[top - 1] <= 0:
        raise ValueError(
            f"eigenvalues: the {top} largest must be positive, the {top}th is {lams[top - 1]:.3g}"
        )
    ratios = lams[: top - 1] / lams[1:top]
    count = start + int(np.argmax(ratios[start - 1 :]))
    return Outliers(count, float(ratios[count - 1]), ratios)


# ----------------------------------------------------------------------------- 9.5 (continued) permutation symmetry

_ELEMENTWISE = (nn.ReLU, nn.Tanh, nn.Sigmoid, nn.GELU, nn.LeakyReLU, nn.ELU, nn.Identity)


def _linear_layers(model, name: str = "model") -> list[nn.Linear]:
    """The Linear layers of an MLP: an nn.Sequential of Linear layers and parameter-free elementwise activations,
    the layers chained (out_features of one = in_features of the next)."""
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"{name} must be a torch.nn.Sequential MLP, got {type(model).__name__}")
    linears = []
    for module in model:
        if isinstance(module, nn.Linear):
            if module.bias is None:
                raise ValueError(f"{name}: every Linear layer needs a bias")
            if linears and linears[-1].out_features != module.in_features:
                raise ValueError(f"{name}: the Linear layers do not chain")
            linears.append(module)
        elif not isinstance(module, _ELEMENTWISE):
            raise ValueError(
                f"{name} must hold only Linear layers and elementwise activations, got {type(module).__name__}"
            )
    if len(linears) < 2:
        raise ValueError(
            f"{name} must have at least one hidden layer (two Linear layers), got {len(linears)}"
        )
    return linears


def _check_perms(perms, widths: list[int]) -> list[np.ndarray]:
    if len(perms) != len(widths):
        raise ValueError(
            f"perms must hold one permutation per hidden layer ({len(widths)}), got {len(perms)}"
        )
    checked = []
    for p, width in zip(perms, widths, strict=True):
        p = np.asarray(p)
        if p.shape != (width,) or not np.array_equal(np.sort(p), np.arange(width)):
            raise ValueError(f"perms: each must be a permutation of 0..{width - 1} (the layer's width)")
        checked.append(p)
    return checked


def permute_hidden(model: nn.Sequential, perms) -> nn.Sequential:
    """A copy of an MLP (`model`, Linear layers W_l (out, in), b_l) with the units of every hidden layer l
    reordered by perms[l] (unit i of the copy is unit perms[l][i] of the model):

    .. math:: W_l \\leftarrow P_l W_l,\\quad b_l \\leftarrow P_l b_l,\\quad W_{l+1} \\leftarrow W_{l+1} P_l^\\top,

    the rows of the layer that computes the units, its bias, and the columns of the next layer that reads them.
    The copy computes the same function (elementwise activations commute with permutations). The model is not
    changed. Section 9.5 (continued)."""
    linears = _linear_layers(model)
    perms = _check_perms(perms, [layer.out_features for layer in linears[:-1]])
    copied = copy.deepcopy(model)
    layers = _linear_layers(copied)
    with torch.no_grad():
        for l, p in enumerate(perms):
            index = torch.as_tensor(p, device=layers[l].weight.device)
            layers[l].weight.copy_(layers[l].weight[index])
            layers[l].bias.copy_(layers[l].bias[index])
            layers[l + 1].weight.copy_(layers[l + 1].weight[:, index])
    return copied


def weight_matching(model_a: nn.Sequential, model_b: nn.Sequential, max_rounds: int = 100, rng=None) -> list:
    """Permutations of the hidden units of `model_b` that align it with `model_a` by weight matching (Ainsworth
    et al., 2023): maximise sum_l <W_l^a, P_l W_l^b P_{l-1}^T> + <b_l^a, P_l b_l^b> over permutation matrices P_l
    (P_0 and P_L the identity). With the other layers' permutations fixed, the objective is linear in P_l,

    .. math:: C_l = W_l^a (W_l^b P_{l-1}^\\top)^\\top + b_l^a b_l^{b\\top} + (W_{l+1}^a)^\\top P_{l+1} W_{l+1}^b,
       \\qquad \\max_{P_l}\\ \\langle C_l, P_l\\rangle,

    a linear assignment problem solved exactly by the Hungarian algorithm (`scipy.optimize.linear_sum_assignment`);
    with one hidden layer that is the answer, with more the layers are updated in turn (in an order drawn from
    `rng`) until a whole round changes nothing (coordinate ascent: the objective never decreases) or after
    `max_rounds`. Returns perms for `permute_hidden(model_b, perms)`. Section 9.5 (continued)."""
    linears_a, linears_b = _linear_layers(model_a, "model_a"), _linear_layers(model_b, "model_b")
    shapes_a = [tuple(layer.weight.shape) for layer in linears_a]
    if shapes_a != [tuple(layer.weight.shape) for layer in linears_b]:
        raise ValueError("model_a and model_b must have the same layer shapes")
    max_rounds = check_int(max_rounds, "max_rounds", 1)
    rng = check_rng(rng)
    Wa = [to_numpy(layer.weight).astype(float) for layer in linears_a]
    ba = [to_numpy(layer.bias).astype(float) for layer in linears_a]
    Wb = [to_numpy(layer.weight).astype(float) for layer in linears_b]
    bb = [to_numpy(layer.bias).astype(float) for layer in linears_b]
    hidden = len(Wa) - 1
    perms = [np.arange(W.shape[0]) for W in Wa[:-1]]
    for _ in range(max_rounds):
        changed = False
        for l in rng.permutation(hidden):
            Wb_in = Wb[l] if l == 0 else Wb[l][:, perms[l - 1]]  # b's inputs in a's order
            Wb_next = Wb[l + 1] if l + 1 == hidden else Wb[l + 1][perms[l + 1]]  # b's next units in a's order
            C = Wa[l] @ Wb_in.T + np.outer(ba[l], bb[l]) + Wa[l + 1].T @ Wb_next
            _, cols = scipy.optimize.linear_sum_assignment(C, maximize=True)
            if not np.array_equal(cols, perms[l]):
                perms[l], changed = cols, True
        if not changed:
            break
    return perms


def hidden_activations(model: nn.Sequential, X) -> list[np.ndarray]:
    """The activations of every hidden layer of an MLP on the inputs X (n, d): the inputs of the second to the
    last Linear layer, a list of arrays (n, width). Section 9.5 (continued)."""
    linears = _linear_layers(model)
    X = check_matrix(X, "X", cols=linears[0].in_features)
    h = torch.as_tensor(X, dtype=linears[0].weight.dtype, device=linears[0].weight.device)
    found = []
    with torch.no_grad():
        for module in model:
            if isinstance(module, nn.Linear) and module is not linears[0]:
                found.append(to_numpy(h).astype(float))
            h = module(h)
    return found


def activation_matching(model_a: nn.Sequential, model_b: nn.Sequential, X) -> list:
    """Permutations of the hidden units of `model_b` that align it with `model_a` by activation matching
    (Ainsworth et al., 2023; Entezari et al., 2022): for every hidden layer, the Pearson correlations
    C_ij = corr(h_i^a, h_j^b) of the units' activations over the inputs X (n, d), and the assignment that
    maximises sum_i C_{i, pi(i)} (`scipy.optimize.linear_sum_assignment`). The layers are independent: permuting
    earlier layers of model_b does not change its activations. A unit that is constant on X correlates 0 with
    everything. Returns perms for `permute_hidden(model_b, perms)`. Section 9.5 (continued)."""
    linears_a, linears_b = _linear_layers(model_a, "model_a"), _linear_layers(model_b, "model_b")
    if [tuple(la.weight.shape) for la in linears_a] != [tuple(lb.weight.shape) for lb in linears_b]:
        raise ValueError("model_a and model_b must have the same layer shapes")
    perms = []
    for Ha, Hb in zip(hidden_activations(model_a, X), hidden_activations(model_b, X), strict=True):
        Za, Zb = Ha - Ha.mean(axis=0), Hb - Hb.mean(axis=0)
        sa, sb = np.linalg.norm(Za, axis=0), np.linalg.norm(Zb, axis=0)
        Za, Zb = Za / np.where(sa > 0, sa, 1.0), Zb / np.where(sb > 0, sb, 1.0)
        perms.append(scipy.optimize.linear_sum_assignment(Za.T @ Zb, maximize=True)[1])
    return perms
