"""Section 9.5 (dlnotes.theory.landscape): the second-order test, sharpness and gradient descent against numpy's
eigenvalues and iterates, Bezier paths on a ring valley, magnitude pruning, masked training, and the lottery
ticket trial."""

import itertools

import numpy as np
import pytest
import torch
from torch import nn

from dlnotes.data import Split
from dlnotes.theory import common, landscape

from conftest import bad_input_test
from test_theory_common import quadratic, random_psd

rng = np.random.default_rng(99)


def test_classify_critical_point_applies_the_second_order_test():
    Q = np.linalg.qr(rng.normal(size=(3, 3)))[0]

    def rotated(lams):
        return Q @ np.diag(lams) @ Q.T

    assert landscape.classify_critical_point(rotated([1.0, 2.0, 3.0])) == "strict minimum"
    assert landscape.classify_critical_point(rotated([-1.0, -2.0, -0.5])) == "strict maximum"
    assert landscape.classify_critical_point(rotated([-1.0, 2.0, 3.0])) == "saddle"
    assert landscape.classify_critical_point(rotated([0.0, 2.0, 3.0])) == "inconclusive"
    assert (
        landscape.classify_critical_point(rotated([0.0, -2.0, 3.0])) == "saddle"
    )  # singular, but indefinite
    assert landscape.classify_critical_point(torch.tensor(rotated([1e-12, 1.0, 2.0]))) == "inconclusive"
    assert landscape.classify_critical_point(rotated([1e-12, 1.0, 2.0]), tol=1e-14) == "strict minimum"


def test_sharpness_matches_eigvalsh_and_warm_starts():
    A, lams = random_psd(rng, 8, high=10.0)
    loss = quadratic(A)
    theta = torch.tensor(rng.normal(size=8))
    result = landscape.sharpness(loss, theta, iters=400, rng=0)
    assert result.value == pytest.approx(np.linalg.eigvalsh(A)[-1], rel=1e-8)
    top = torch.tensor(np.linalg.eigh(A)[1][:, -1])
    assert landscape.sharpness(loss, theta, iters=1, v0=top).value == pytest.approx(lams[-1], rel=1e-12)


def test_gd_sharpness_follows_gradient_descent_on_a_quadratic():
    A, lams = random_psd(rng, 4, high=3.0)
    theta0, eta = rng.normal(size=4), 0.2
    run = landscape.gd_sharpness(
        lambda th: common.LossGrad(0.5 * th @ A @ th, A @ th), quadratic(A), theta0, eta, 30, every=10, rng=0
    )
    expected = np.linalg.matrix_power(np.eye(4) - eta * A, 30) @ theta0
    assert np.allclose(run.theta, expected, atol=1e-12)
    assert run.losses.shape == (30,) and list(run.measured_at) == [10, 20, 30]
    assert np.allclose(run.sharpness, lams[-1], rtol=1e-3)  # H = A everywhere; warm starts keep converging


def test_bezier_point_ends_midpoint_and_line():
    a, m, b = rng.normal(size=(3, 5))
    assert np.allclose(landscape.bezier_point(a, m, b, 0.0), a) and np.allclose(
        landscape.bezier_point(a, m, b, 1.0), b
    )
    assert np.allclose(landscape.bezier_point(a, m, b, 0.5), (a + 2 * m + b) / 4)
    ts = np.linspace(0, 1, 7)
    line = landscape.bezier_point(a, (a + b) / 2, b, ts)
    assert line.shape == (7, 5) and np.allclose(line, (1 - ts[:, None]) * a + ts[:, None] * b)
    as_tensor = landscape.bezier_point(*(torch.tensor(v) for v in (a, m, b)), torch.tensor(ts))
    assert isinstance(as_tensor, torch.Tensor) and np.allclose(
        as_tensor.numpy(), landscape.bezier_point(a, m, b, ts)
    )


def test_path_losses_and_fit_bezier_on_a_ring_valley():
    def ring(theta):  # zero loss on the unit circle
        return (theta @ theta - 1) ** 2

    theta_a, theta_b = (
        torch.tensor([1.0, 0.0], dtype=torch.float64),
        torch.tensor([0.0, 1.0], dtype=torch.float64),
    )
    line = landscape.path_losses(ring, theta_a, theta_b, points=5)
    ts = np.linspace(0, 1, 5)
    assert np.allclose(line.loss, ((1 - ts) ** 2 + ts**2 - 1) ** 2) and line.barrier == pytest.approx(0.25)
    theta_m = landscape.fit_bezier(ring, theta_a, theta_b, steps=300, lr=0.02, rng=0)
    curve = landscape.path_losses(ring, theta_a, theta_b, theta_m)
    assert curve.loss.max() < 0.05 < line.loss.max()


def test_magnitude_mask_and_prune_keep_the_largest_weights():
    w = rng.normal(size=(20, 7))
    for frac in (0.0, 0.3, 0.8, 0.95, 1.0):
        mask = landscape.magnitude_mask(w, frac)
        pruned = mask == 0
        assert pruned.sum() == round(frac * w.size) and mask.shape == w.shape
        if 0 < pruned.sum() < w.size:
            assert np.abs(w[~pruned]).min() >= np.abs(w[pruned]).max()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 9), nn.ReLU(), nn.Linear(9, 4))
    masks = landscape.magnitude_prune(model, 0.8)
    assert sorted(masks) == ["0.weight", "2.weight"]  # weight matrices only, no biases
    for name, mask in masks.items():
        weight = dict(model.named_parameters())[name]
        assert int((mask == 0).sum()) == round(0.8 * weight.numel())
        assert torch.equal(
            mask, torch.as_tensor(landscape.magnitude_mask(weight.detach(), 0.8), dtype=mask.dtype)
        )


def test_train_masked_keeps_pruned_weights_at_zero_and_is_masked_sgd():
    X, y = rng.normal(size=(60, 6)), rng.integers(0, 3, 60)
    models = []
    for _ in range(2):
        torch.manual_seed(0)
        models.append(nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3)))
    model = models[0].eval()
    masks = landscape.magnitude_prune(model, 0.5)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    history = landscape.train_masked(
        model, masks, X, y, epochs=20, lr=0.1, batch_size=16, rng=0, progress=False
    )
    assert history.shape == (20,) and history[-1] < history[0] and not model.training
    for name, p in model.named_parameters():
        if name in masks:
            assert torch.all(p[masks[name] == 0] == 0)
            assert not torch.equal(p[masks[name] == 1], before[name][masks[name] == 1])
    # the same training written out: masked weights zeroed, their gradients masked, SGD over a fresh order per epoch
    reference, order_rng = models[1], np.random.default_rng(0)
    params = dict(reference.named_parameters())
    with torch.no_grad():
        for name, mask in masks.items():
            params[name].mul_(mask)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    Xt, yt = torch.tensor(X, dtype=torch.float32), torch.tensor(y)
    for epoch in range(20):
        order, total = order_rng.permutation(60), 0.0
        for start in range(0, 60, 16):
            idx = torch.as_tensor(order[start : start + 16])
            loss = nn.functional.cross_entropy(reference(Xt[idx]), yt[idx])
            optimizer.zero_grad()
            loss.backward()
            for name, mask in masks.items():
                params[name].grad *= mask
            optimizer.step()
            total += loss.item() * len(idx)
        assert history[epoch] == pytest.approx(total / 60, rel=1e-12)
    assert all(
        torch.allclose(a, b, atol=1e-7)
        for a, b in zip(model.parameters(), reference.parameters(), strict=True)
    )


def test_lottery_trial_runs_and_is_reproducible():
    X_all, y_all = rng.normal(size=(120, 64)), rng.integers(0, 10, 120)
    split = Split(X_all[:80], X_all[80:], y_all[:80], y_all[80:])
    trial = landscape.lottery_ticket_trial(split, (0.5, 0.9), hidden=8, epochs=1, rng=0)
    assert 0 <= trial.dense <= 1 and trial.ticket.shape == trial.fresh.shape == (2,)
    again = landscape.lottery_ticket_trial(split, (0.5, 0.9), hidden=8, epochs=1, rng=0)
    assert again.dense == trial.dense and np.array_equal(again.ticket, trial.ticket)
    assert np.array_equal(again.fresh, trial.fresh)


# ----------------------------------------------------------------------------- 9.5 (continued) the Hessian's spectrum


def test_lanczos_with_full_steps_finds_every_eigenvalue_of_a_matrix():
    A, lams = random_psd(rng, 12, low=-2.0, high=5.0)
    result = landscape.lanczos(lambda v: A @ v, 12, steps=12, rng=0)
    assert np.allclose(result.ritz, np.linalg.eigvalsh(A), atol=1e-10)
    assert result.weights.sum() == pytest.approx(1.0, abs=1e-12)
    v0 = rng.normal(size=12)
    started = landscape.lanczos(lambda v: A @ v, 12, steps=12, v0=v0)
    eigvals, eigvecs = np.linalg.eigh(A)
    expected_weights = (eigvecs.T @ v0 / np.linalg.norm(v0)) ** 2  # the spectral measure seen from v0
    assert np.allclose(started.weights, expected_weights, atol=1e-10)


def test_lanczos_stops_on_an_invariant_subspace():
    A = np.diag([1.0, 2.0, 3.0, 4.0, 5.0])
    v0 = np.array([1.0, 1.0, 0.0, 0.0, 0.0])  # spans an invariant subspace of dimension 2
    result = landscape.lanczos(lambda v: A @ v, 5, steps=5, v0=v0)
    assert np.allclose(result.ritz, [1.0, 2.0], atol=1e-12) and len(result.beta) == 1


def test_hessian_spectrum_top_eigenvalues_match_the_full_hessian():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 12), nn.Tanh(), nn.Linear(12, 3)).double()
    f, theta = common.flat_function(model)
    X, y = torch.tensor(rng.normal(size=(40, 4))), torch.tensor(rng.integers(0, 3, 40))

    def loss(th):
        return nn.functional.cross_entropy(f(th, X), y)

    H = torch.autograd.functional.hessian(loss, theta).numpy()  # the reference: the full (99, 99) matrix
    exact = np.linalg.eigvalsh(H)
    spectrum = landscape.hessian_spectrum(loss, theta, steps=60, rng=1)
    assert np.allclose(spectrum.ritz[-5:], exact[-5:], rtol=1e-6)  # the extreme eigenvalues converge first
    assert spectrum.ritz[0] == pytest.approx(exact[0], abs=1e-6)
    assert spectrum.ritz.max() <= exact.max() + 1e-10 and spectrum.ritz.min() >= exact.min() - 1e-10


def test_count_outliers_finds_the_largest_gap():
    lams = np.r_[np.linspace(5.0, 3.0, 9), np.linspace(1.0, 0.1, 40), -0.05 * np.ones(5)]
    found = landscape.count_outliers(rng.permutation(lams), top=30)
    assert found.count == 9 and found.gap == pytest.approx(3.0)
    assert len(found.ratios) == 29
    assert landscape.count_outliers(np.linspace(1.0, 0.5, 40), top=30).gap < 1.05  # no outliers: no gap
    apart = np.r_[20.0, lams]  # a top eigenvalue 4x above the next, then the gap of 3 after 10 eigenvalues
    assert landscape.count_outliers(apart).count == 1
    assert landscape.count_outliers(apart, start=2)[:2] == (10, pytest.approx(3.0))


# ----------------------------------------------------------------------------- 9.5 (continued) permutation symmetry


def _mlp(widths, seed):
    torch.manual_seed(seed)
    modules = []
    for fan_in, fan_out in zip(widths[:-1], widths[1:], strict=True):
        modules += [nn.Linear(fan_in, fan_out), nn.ReLU()]
    return nn.Sequential(*modules[:-1]).double()


def test_permute_hidden_keeps_the_function_and_moves_the_weights():
    model = _mlp([5, 7, 6, 3], 0)
    perms = [rng.permutation(7), rng.permutation(6)]
    permuted = landscape.permute_hidden(model, perms)
    X = torch.tensor(rng.normal(size=(50, 5)))
    assert (permuted(X) - model(X)).abs().max().item() < 1e-6 * model(X).abs().max().item()
    assert torch.equal(permuted[0].weight, model[0].weight[perms[0]])
    assert torch.equal(permuted[0].bias, model[0].bias[perms[0]])
    assert torch.equal(permuted[2].weight, model[2].weight[perms[1]][:, perms[0]])
    assert torch.equal(permuted[4].weight, model[4].weight[:, perms[1]]) and torch.equal(
        permuted[4].bias, model[4].bias
    )
    # a control: permuting the rows of W_1 without the columns of W_2 changes the function
    broken = landscape.permute_hidden(model, [perms[0], np.arange(6)])
    with torch.no_grad():
        broken[2].weight.copy_(model[2].weight)
    assert (broken(X) - model(X)).abs().max().item() > 1e-3


def test_matching_a_permuted_copy_recovers_the_permutation():
    model = _mlp([5, 9, 8, 3], 1)
    perms = [rng.permutation(9), rng.permutation(8)]
    copy = landscape.permute_hidden(model, perms)
    inverse = [np.argsort(p) for p in perms]  # unit i of the copy is unit p[i] of the model
    found_w = landscape.weight_matching(model, copy, rng=0)
    found_a = landscape.activation_matching(model, copy, rng.normal(size=(200, 5)))
    for found in (found_w, found_a):
        assert all(np.array_equal(f, q) for f, q in zip(found, inverse, strict=True))
        realigned = landscape.permute_hidden(copy, found)
        assert all(torch.equal(p, q) for p, q in zip(realigned.parameters(), model.parameters(), strict=True))


def test_weight_matching_is_the_best_assignment_for_one_hidden_layer():
    a, b = _mlp([3, 5, 2], 2), _mlp([3, 5, 2], 3)
    (found,) = landscape.weight_matching(a, b)

    def agreement(
        p,
    ):  # the weight-matching objective <W_1^a, P W_1^b> + <b_1^a, P b_1^b> + <W_2^a, W_2^b P^T>
        pb = landscape.permute_hidden(b, [np.array(p)])
        return sum((pa * pq).sum().item() for pa, pq in zip(a.parameters(), pb.parameters(), strict=True)) - (
            (a[2].bias * b[2].bias).sum().item()
        )

    best = max(itertools.permutations(range(5)), key=agreement)  # brute force over all 120 permutations
    assert np.array_equal(found, best)


def test_hidden_activations_are_the_inputs_of_the_later_layers():
    model = _mlp([4, 6, 5, 2], 4)
    X = rng.normal(size=(10, 4))
    h1, h2 = landscape.hidden_activations(model, X)
    Xt = torch.tensor(X)
    assert np.allclose(h1, torch.relu(model[0](Xt)).detach().numpy())
    assert np.allclose(h2, torch.relu(model[2](torch.tensor(h1))).detach().numpy())


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: landscape.classify_critical_point(np.ones((2, 3))), ValueError, "H must be a symmetric square matrix"),
    (lambda: landscape.classify_critical_point(np.array([[0.0, 1.0], [0.0, 0.0]])), ValueError, "H must be a symmetric"),
    (lambda: landscape.sharpness(torch.sum, torch.zeros(3), v0=torch.zeros(2)), ValueError, "v0 must have the shape of theta"),
    (lambda: landscape.gd_sharpness(lambda t: t, torch.sum, np.zeros(2), 0.1, 0), ValueError, "steps must be an int in [1, inf)"),
    (lambda: landscape.bezier_point(np.zeros(2), np.zeros(3), np.zeros(2), 0.5), ValueError, "must have one shape"),
    (lambda: landscape.bezier_point(np.zeros(2), np.zeros(2), np.zeros(2), 1.5), ValueError, "t must be a number or a vector (T,) in [0, 1]"),
    (lambda: landscape.path_losses(torch.sum, torch.zeros(2), torch.zeros(2), points=1), ValueError, "points must be an int in [2, inf)"),
    (lambda: landscape.fit_bezier(torch.sum, torch.zeros(2), torch.zeros(3)), ValueError, "theta_a and theta_b must have one shape"),
    (lambda: landscape.magnitude_mask(np.ones(4), 1.2), ValueError, "frac must be a finite number in [0, 1]"),
    (lambda: landscape.magnitude_prune(np.ones((2, 2)), 0.5), TypeError, "model must be a torch.nn.Module"),
    (lambda: landscape.train_masked(nn.Linear(2, 2), {"bias": torch.ones(3)}, np.ones((4, 2)), [0, 1, 0, 1], epochs=1, lr=0.1), ValueError, "masks must map parameter names"),
    (lambda: landscape.lanczos(lambda v: v[:2], 3), ValueError, "matvec must return a vector of shape (3,)"),
    (lambda: landscape.lanczos(lambda v: v, 3, v0=np.zeros(3)), ValueError, "v0 must be a non-zero vector"),
    (lambda: landscape.count_outliers(np.r_[1.0, 0.5, -1.0], top=3), ValueError, "the 3 largest must be positive"),
    (lambda: landscape.count_outliers(np.ones(5), top=9), ValueError, "top must be an int in [2, 5]"),
    (lambda: landscape.count_outliers(np.ones(5), top=5, start=5), ValueError, "start must be an int in [1, 4]"),
    (lambda: landscape.permute_hidden(nn.Linear(2, 2), []), TypeError, "model must be a torch.nn.Sequential MLP"),
    (lambda: landscape.permute_hidden(nn.Sequential(nn.Linear(2, 3), nn.Conv1d(1, 1, 1), nn.Linear(3, 1)), [np.arange(3)]), ValueError, "only Linear layers and elementwise activations"),
    (lambda: landscape.permute_hidden(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)), [np.array([0, 0, 1])]), ValueError, "each must be a permutation of 0..2"),
    (lambda: landscape.permute_hidden(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)), []), ValueError, "one permutation per hidden layer (1)"),
    (lambda: landscape.weight_matching(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)), nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))), ValueError, "the same layer shapes"),
    (lambda: landscape.activation_matching(nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)), nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)), np.ones((4, 5))), ValueError, "X must"),
]  # fmt: skip


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
