import numpy as np
import pytest
import torch

from dlnotes.activations import ACTIVATIONS, get_activation, log_softmax, sigmoid, softmax

rng = np.random.default_rng(3)


def test_sigmoid_matches_torch_without_overflow():
    z = np.linspace(-800, 800, 1601)
    assert np.allclose(sigmoid(z), torch.sigmoid(torch.tensor(z)).numpy(), atol=1e-15)
    assert np.isfinite(sigmoid(z)).all()


def test_softmax_is_stable_and_matches_torch():
    z = rng.normal(size=(5, 7)) * 1000
    assert np.allclose(softmax(z), torch.softmax(torch.tensor(z), dim=1).numpy(), atol=1e-12)
    assert np.isfinite(softmax(z)).all() and np.allclose(softmax(z + 123.0), softmax(z))
    assert np.allclose(log_softmax(z), torch.log_softmax(torch.tensor(z), dim=1).numpy(), atol=1e-9)
    assert np.allclose(softmax(z, axis=0), torch.softmax(torch.tensor(z), dim=0).numpy(), atol=1e-12)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_numpy_torch_and_derivative_agree_away_from_zero(name):
    phi, derivative, torch_phi = ACTIVATIONS[name]
    z = np.concatenate([np.linspace(-4, -0.01, 50), np.linspace(0.01, 4, 50)])
    z_t = torch.tensor(z, requires_grad=True)
    torch_phi(z_t).sum().backward()
    assert np.allclose(phi(z), torch_phi(torch.tensor(z)).detach().numpy(), atol=1e-12)
    assert np.allclose(derivative(z), z_t.grad.numpy(), atol=1e-12)


def test_relu_derivative_at_zero_follows_the_lecture():
    assert ACTIVATIONS["relu"].derivative(0.0) == 1.0


def test_unknown_activation_is_named():
    with pytest.raises(ValueError, match="activation must be one of"):
        get_activation("swish")
