"""Section 8.5: batch norm (functional and module, train and eval mode, running statistics, gradients) against
nn.BatchNorm1d, group norm against nn.GroupNorm and nn.LayerNorm, RMS norm against nn.RMSNorm, weight
normalisation and its gradients against torch.nn.utils.parametrizations.weight_norm and autograd."""

import numpy as np
import pytest
import torch

from dlnotes.tricks.normalisation import (
    BatchNorm,
    batch_norm,
    group_norm,
    rms_norm,
    weight_norm,
    weight_norm_grads,
)

from conftest import bad_input_test

rng = np.random.default_rng(85)


def _torch_bn(d, dtype=torch.float64, momentum=0.1, eps=1e-5):
    bn = torch.nn.BatchNorm1d(d, momentum=momentum, eps=eps).to(dtype)
    with torch.no_grad():
        bn.weight.normal_()
        bn.bias.normal_()
    return bn


@pytest.mark.parametrize(("B", "momentum", "eps"), [(2, 0.1, 1e-5), (16, 0.1, 1e-5), (7, 0.3, 1e-3)])
def test_batch_norm_equals_batchnorm1d_in_train_and_eval_mode(B, momentum, eps):
    d = 5
    bn = _torch_bn(d, momentum=momentum, eps=eps)
    gamma, beta = bn.weight.detach().numpy(), bn.bias.detach().numpy()
    running_mean, running_var = np.zeros(d), np.ones(d)
    for _ in range(4):
        F = rng.normal(2.0, 3.0, size=(B, d))
        result = batch_norm(
            F, gamma, beta, running_mean=running_mean, running_var=running_var, momentum=momentum, eps=eps
        )
        running_mean, running_var = result.running_mean, result.running_var
        with torch.no_grad():
            expected = bn(torch.tensor(F)).numpy()
        assert np.allclose(result.out, expected, atol=1e-12)
        assert np.allclose(running_mean, bn.running_mean.numpy(), atol=1e-12)
        assert np.allclose(running_var, bn.running_var.numpy(), atol=1e-12)
    bn.eval()
    F = rng.normal(2.0, 3.0, size=(3, d))
    own_eval = batch_norm(
        F, gamma, beta, running_mean=running_mean, running_var=running_var, training=False, eps=eps
    )
    with torch.no_grad():
        assert np.allclose(own_eval.out, bn(torch.tensor(F)).numpy(), atol=1e-12)
    assert np.array_equal(own_eval.running_mean, running_mean)  # eval mode does not update


def test_batch_norm_train_mode_uses_the_biased_variance_and_the_running_var_the_unbiased_one():
    F = rng.normal(size=(4, 3))
    out = batch_norm(F, np.ones(3), np.zeros(3), running_mean=np.zeros(3), running_var=np.zeros(3), eps=0.0)
    assert np.allclose(out.out, (F - F.mean(0)) / F.std(0, ddof=0), atol=1e-12)
    assert np.allclose(out.running_var, 0.1 * F.var(0, ddof=1), atol=1e-14)
    assert np.allclose(out.running_mean, 0.1 * F.mean(0), atol=1e-14)


def test_batch_norm_without_running_statistics_returns_none():
    result = batch_norm(rng.normal(size=(5, 2)), np.ones(2), np.zeros(2))
    assert result.running_mean is None and result.running_var is None


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_batchnorm_module_equals_batchnorm1d_outputs_gradients_and_buffers(dtype):
    d, B = 6, 12
    bn = _torch_bn(d, dtype)
    own = BatchNorm(d).to(dtype)
    with torch.no_grad():
        own.gamma.copy_(bn.weight)
        own.beta.copy_(bn.bias)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for _ in range(3):
        X = torch.tensor(rng.normal(1.0, 2.0, size=(B, d)), dtype=dtype, requires_grad=True)
        loss_torch = (bn(X) ** 3).sum()
        (grad_torch,) = torch.autograd.grad(loss_torch, X)
        loss_own = (own(X) ** 3).sum()
        (grad_own,) = torch.autograd.grad(loss_own, X)
        assert torch.allclose(grad_own, grad_torch, atol=tol * 10, rtol=tol)
        assert torch.allclose(own.running_mean, bn.running_mean, atol=tol)
        assert torch.allclose(own.running_var, bn.running_var, atol=tol)
    X = torch.tensor(rng.normal(size=(B, d)), dtype=dtype)
    (bn(X) ** 2 * torch.arange(d)).sum().backward()
    (own(X) ** 2 * torch.arange(d)).sum().backward()
    assert torch.allclose(own.gamma.grad, bn.weight.grad, atol=tol * 10, rtol=tol)
    assert torch.allclose(own.beta.grad, bn.bias.grad, atol=tol * 10, rtol=tol)
    own.eval()
    bn.eval()
    X1 = torch.tensor(rng.normal(size=(1, d)), dtype=dtype)  # a batch of one is fine in eval mode
    with torch.no_grad():
        assert torch.allclose(own(X1), bn(X1), atol=tol)
    assert set(dict(own.named_buffers())) == {"running_mean", "running_var"}


def test_batchnorm_module_trains_in_an_mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), BatchNorm(8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    X, y = torch.randn(64, 4), torch.randn(64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(50):
        opt.zero_grad()
        loss = ((model(X) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("groups", [1, 2, 3, 6])
def test_group_norm_equals_nn_groupnorm(groups):
    F, gamma, beta = rng.normal(size=(4, 6)), rng.normal(size=6), rng.normal(size=6)
    gn = torch.nn.GroupNorm(groups, 6).double()
    with torch.no_grad():
        gn.weight.copy_(torch.tensor(gamma))
        gn.bias.copy_(torch.tensor(beta))
        expected = gn(torch.tensor(F)).numpy()
    assert np.allclose(group_norm(F, gamma, beta, groups=groups), expected, atol=1e-10)


def test_group_norm_with_one_group_is_layer_norm():
    F, gamma, beta = rng.normal(size=(5, 8)), rng.normal(size=8), rng.normal(size=8)
    ln = torch.nn.LayerNorm(8).double()
    with torch.no_grad():
        ln.weight.copy_(torch.tensor(gamma))
        ln.bias.copy_(torch.tensor(beta))
        expected = ln(torch.tensor(F)).numpy()
    assert np.allclose(group_norm(F, gamma, beta, groups=1), expected, atol=1e-12)


def test_rms_norm_equals_nn_rmsnorm():
    F, gamma = rng.normal(size=(5, 7)), rng.normal(size=7)
    rn = torch.nn.RMSNorm(7, eps=1e-6).double()
    with torch.no_grad():
        rn.weight.copy_(torch.tensor(gamma))
        expected = rn(torch.tensor(F)).numpy()
    assert np.allclose(rms_norm(F, gamma), expected, atol=1e-12)


def test_weight_norm_and_its_gradients_equal_torch_parametrization_and_autograd():
    layer = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(6, 3).double())
    with torch.no_grad():
        layer.parametrizations.weight.original0.mul_(
            torch.tensor([[0.5], [-2.0], [3.0]], dtype=torch.float64)
        )
    g = layer.parametrizations.weight.original0.detach().numpy().ravel()
    v = layer.parametrizations.weight.original1.detach().numpy()
    assert np.allclose(weight_norm(v, g), layer.weight.detach().numpy(), atol=1e-14)
    x = torch.tensor(rng.normal(size=(10, 6)))
    W = layer.weight.detach().clone().requires_grad_(True)
    (grad_w,) = torch.autograd.grad((torch.tanh(x @ W.T + layer.bias.detach()) ** 2).sum(), W)
    (torch.tanh(layer(x)) ** 2).sum().backward()
    grads = weight_norm_grads(v, g, grad_w.numpy())
    assert np.allclose(grads.grad_v, layer.parametrizations.weight.original1.grad.numpy(), atol=1e-12)
    assert np.allclose(grads.grad_g, layer.parametrizations.weight.original0.grad.numpy().ravel(), atol=1e-12)
    assert np.allclose((grads.grad_v * v).sum(axis=1), 0, atol=1e-12)


# ----------------------------------------------------------------------------- bad input

ONES3 = np.ones(3)
F43 = np.arange(12.0).reshape(4, 3)
BAD_INPUT = [  # (call, error, message)
    (lambda: batch_norm(np.ones(3), ONES3, ONES3), ValueError, r"F must have shape (any, any)"),
    (lambda: batch_norm(F43, np.ones(2), ONES3), ValueError, r"gamma must have shape (3,)"),
    (lambda: batch_norm(F43[:1], ONES3, ONES3), ValueError, "at least 2 examples"),
    (
        lambda: batch_norm(F43, ONES3, ONES3, training=False),
        ValueError,
        "running_mean and running_var",
    ),
    (lambda: batch_norm(F43, ONES3, ONES3, running_mean=ONES3), ValueError, "both running_mean"),
    (lambda: batch_norm(F43, ONES3, ONES3, training=1), TypeError, "training must be True or False"),
    (lambda: batch_norm(F43, ONES3, ONES3, momentum=1.5), ValueError, "momentum"),
    (lambda: batch_norm(F43, ONES3, ONES3, eps=-1.0), ValueError, "eps"),
    (
        lambda: batch_norm(np.ones((4, 3)), ONES3, ONES3, eps=0.0),
        ValueError,
        "constant over the batch",
    ),
    (
        lambda: batch_norm(torch.ones(4, 3), torch.ones(2), ONES3),
        ValueError,
        r"gamma must have shape (3,)",
    ),
    (lambda: BatchNorm(0), ValueError, "d must be an int"),
    (lambda: BatchNorm(3)(np.ones((4, 3))), TypeError, "x must be a torch tensor"),
    (lambda: BatchNorm(3)(torch.ones(4, 2)), ValueError, r"x must have shape (any, 3)"),
    (lambda: group_norm(F43, ONES3, ONES3, groups=2), ValueError, "groups must divide"),
    (lambda: group_norm(F43, ONES3, ONES3, groups=4), ValueError, "groups must be an int"),
    (lambda: rms_norm(F43, np.ones(4)), ValueError, r"gamma must have shape (3,)"),
    (lambda: weight_norm(np.zeros((2, 3)), np.ones(2)), ValueError, "non-zero"),
    (lambda: weight_norm(np.ones((2, 3)), ONES3), ValueError, r"g must have shape (2,)"),
    (
        lambda: weight_norm_grads(np.ones((2, 3)), np.ones(2), ONES3),
        ValueError,
        r"grad_w must have shape",
    ),
    (lambda: weight_norm("v", np.ones(2)), TypeError, "v must be an array"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
