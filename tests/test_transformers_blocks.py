"""Section 6.2: sinusoidal positional encodings and their rotations against the formulas written out, GELU and
layer norm against torch, the transformer block against nn.TransformerEncoderLayer (pre- and post-LN, with a
causal mask), linear attention (parallel and recurrent) against a brute-force sum."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlnotes import transformers as tf
from dlnotes.activations import gelu

from conftest import bad_input_test

rng = np.random.default_rng(62)


def test_sinusoidal_pe_matches_the_formula_entry_by_entry():
    T, d, C = 9, 6, 50.0
    P = tf.sinusoidal_pe(T, d, C=C)
    for t in range(T):
        for i in range(d // 2):
            omega = C ** (-2 * i / d)
            assert math.isclose(P[t, 2 * i], math.sin(t * omega), abs_tol=1e-14)
            assert math.isclose(P[t, 2 * i + 1], math.cos(t * omega), abs_tol=1e-14)
    P64 = tf.sinusoidal_pe(3, 64)
    assert P64[0, 1] == 1.0 and math.isclose(P64[1, 0], math.sin(1.0))  # omega_0 = 1
    assert math.isclose(P64[1, 62], math.sin(1e4 ** (-62 / 64)), rel_tol=1e-12)


@pytest.mark.parametrize("delta", [0, 1, 5, -3, 2.5])
def test_pe_rotation_shifts_every_position_and_is_orthogonal(delta):
    d, C = 16, 1e4
    R = tf.pe_rotation(delta, d, C=C)
    t = np.arange(20) + 3.0  # positions t and t + delta, both computed from the formula
    omega = C ** (-np.arange(0, d, 2) / d)

    def encode(times):
        P = np.empty((len(times), d))
        P[:, 0::2], P[:, 1::2] = np.sin(times[:, None] * omega), np.cos(times[:, None] * omega)
        return P

    assert np.allclose(encode(t + delta), encode(t) @ R.T, atol=1e-12)  # rows: p_(t+delta) = R p_t
    assert np.allclose(R @ R.T, np.eye(d), atol=1e-12)
    assert np.allclose(tf.pe_rotation(-delta, d, C=C), R.T, atol=1e-12)
    assert np.count_nonzero(R[:2, 2:]) == 0  # block-diagonal


def test_gelu_equals_torch_exact_and_tanh():
    z = np.linspace(-8, 8, 4001)
    exact = F.gelu(torch.tensor(z)).numpy()
    approximate = F.gelu(torch.tensor(z), approximate="tanh").numpy()
    assert np.allclose(gelu(z), exact, atol=1e-12)
    assert np.allclose(gelu(z, approximate=True), approximate, atol=1e-12)
    assert 4e-4 < np.abs(gelu(z) - gelu(z, approximate=True)).max() < 1e-3
    assert gelu(np.ones((2, 3))).shape == (2, 3)


def test_layer_norm_equals_nn_layer_norm_with_biased_variance():
    X = rng.normal(2.0, 3.0, size=(2, 5, 7))
    g, b = rng.normal(size=7), rng.normal(size=7)
    reference = F.layer_norm(torch.tensor(X), (7,), torch.tensor(g), torch.tensor(b), eps=1e-5).numpy()
    assert np.allclose(tf.layer_norm(X, g, b), reference, atol=1e-12)
    x = X[0, 0]
    unbiased = g * (x - x.mean()) / np.sqrt(x.var(ddof=1) + 1e-5) + b
    assert not np.allclose(tf.layer_norm(x, g, b), unbiased)


@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_block_equals_torch_encoder_layer(norm_first):
    torch.manual_seed(0)
    reference = torch.nn.TransformerEncoderLayer(
        12, 3, 20, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first
    ).double()
    reference.eval()
    with torch.no_grad():  # non-trivial LayerNorm parameters and biases
        for p in reference.parameters():
            p.add_(0.1 * torch.randn_like(p))
    block = tf.TransformerBlock(12, 3, 20, norm_first=norm_first).double().load_torch_layer(reference)
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    assert torch.allclose(block(x), reference(x), atol=1e-12)
    mask = torch.tensor(tf.causal_mask(6))  # True = may attend; torch's src_mask: True = masked out
    assert torch.allclose(block(x, mask=mask), reference(x, src_mask=~mask), atol=1e-12)
    assert not torch.allclose(block(x, mask=mask), block(x))


def test_transformer_block_takes_one_unbatched_sequence_like_a_batch_of_one():
    torch.manual_seed(2)
    block = tf.TransformerBlock(8, 2, 16).double()
    x = torch.randn(5, 8, dtype=torch.float64)
    mask = torch.tensor(tf.causal_mask(5))
    assert block(x, mask).shape == (5, 8)
    assert torch.allclose(block(x, mask), block(x[None], mask)[0], atol=1e-14)


def test_load_torch_layer_refuses_a_layer_that_computes_something_else():
    # each of these layers gives other outputs than the block for the same weights: loading must fail
    block = tf.TransformerBlock(8, 2, 16, norm_first=True)
    for kwargs in (
        {"activation": "gelu", "norm_first": False},
        {"activation": "relu", "norm_first": True},
        {"activation": torch.nn.GELU(approximate="tanh"), "norm_first": True},
        {"activation": "gelu", "norm_first": True, "layer_norm_eps": 1e-6},
    ):
        layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, **kwargs)
        with pytest.raises(ValueError):
            block.load_torch_layer(layer)
    ok = torch.nn.TransformerEncoderLayer(
        8, 2, 16, activation=torch.nn.GELU(), batch_first=True, norm_first=True
    )
    assert block.load_torch_layer(ok) is block


def test_transformer_block_is_causal_with_the_mask():
    torch.manual_seed(1)
    block = tf.TransformerBlock(8, 2, 16).double()
    x = torch.randn(1, 7, 8, dtype=torch.float64)
    changed = x.clone()
    changed[0, 4:] += 1.0
    mask = torch.tensor(tf.causal_mask(7))
    y, y_changed = block(x, mask=mask), block(changed, mask=mask)
    assert torch.allclose(y[0, :4], y_changed[0, :4]) and not torch.allclose(y[0, 4], y_changed[0, 4])


def test_elu_plus_one_equals_torch():
    x = rng.normal(size=(5, 4)) * 3
    assert np.allclose(tf.elu_plus_one(x), F.elu(torch.tensor(x)).numpy() + 1, atol=1e-14)


@pytest.mark.parametrize("mode", ["parallel", "recurrent"])
def test_linear_attention_equals_the_brute_force_causal_sum(mode):
    T, d_k, d_v = 11, 3, 4
    Q, K, V = rng.normal(size=(T, d_k)), rng.normal(size=(T, d_k)), rng.normal(size=(T, d_v))
    fq, fk = F.elu(torch.tensor(Q)).numpy() + 1, F.elu(torch.tensor(K)).numpy() + 1
    expected = np.array(
        [
            sum(fq[t] @ fk[j] * V[j] for j in range(t + 1)) / sum(fq[t] @ fk[j] for j in range(t + 1))
            for t in range(T)
        ]
    )
    assert np.allclose(tf.linear_attention(Q, K, V, mode=mode), expected, atol=1e-12)
    squared = tf.linear_attention(Q, K, V, phi=np.square, mode=mode)  # any positive feature map
    other = tf.linear_attention(
        Q, K, V, phi=np.square, mode="parallel" if mode == "recurrent" else "recurrent"
    )
    assert np.allclose(squared, other, atol=1e-12)


# ----------------------------------------------------------------------------- bad input

Q5 = np.ones((5, 3))
BAD_INPUT = [  # (call, error, message)
    (lambda: tf.sinusoidal_pe(0, 4), ValueError, "T must be an int"),
    (lambda: tf.sinusoidal_pe(5, 5), ValueError, "d must be even"),
    (lambda: tf.sinusoidal_pe(5, 4.0), TypeError, "d must be an int"),
    (lambda: tf.sinusoidal_pe(5, 4, C=1.0), ValueError, "C must be"),
    (lambda: tf.pe_rotation(1, 3), ValueError, "d must be even"),
    (lambda: tf.pe_rotation("one", 4), TypeError, "delta must be a real number"),
    (lambda: gelu(1.0, approximate="tanh"), TypeError, "approximate must be True or False"),
    (
        lambda: tf.layer_norm(np.ones((2, 4)), np.ones(3), np.zeros(4)),
        ValueError,
        r"g must have shape (4,)",
    ),
    (lambda: tf.layer_norm(np.ones((2, 4)), np.ones(4), np.zeros(4), eps=0), ValueError, "eps"),
    (lambda: tf.TransformerBlock(10, 3, 20), ValueError, "h must divide d"),
    (lambda: tf.TransformerBlock(8, 2, 0), ValueError, "d_ff"),
    (lambda: tf.TransformerBlock(8, 2, 16, norm_first="yes"), TypeError, "norm_first"),
    (lambda: tf.TransformerBlock(8, 2, 16)(torch.ones(3, 7)), ValueError, r"x must be a tensor (B, T, 8)"),
    (lambda: tf.TransformerBlock(8, 2, 16)(torch.ones(1, 2, 3, 8)), ValueError, r"or (T, 8)"),
    (
        lambda: tf.TransformerBlock(8, 2, 16).load_torch_layer(
            torch.nn.TransformerEncoderLayer(8, 2, 16, activation="relu", norm_first=True)
        ),
        ValueError,
        "exact GELU",
    ),
    (
        lambda: tf.TransformerBlock(8, 2, 16, norm_first=False).load_torch_layer(
            torch.nn.TransformerEncoderLayer(8, 2, 16, activation="gelu", norm_first=True)
        ),
        ValueError,
        "norm_first = False",
    ),
    (
        lambda: tf.TransformerBlock(8, 2, 16).load_torch_layer(
            torch.nn.TransformerEncoderLayer(
                8, 2, 16, activation="gelu", norm_first=True, layer_norm_eps=1e-6
            )
        ),
        ValueError,
        "eps = 1e-05",
    ),
    (
        lambda: tf.TransformerBlock(8, 2, 16).load_torch_layer(torch.nn.Linear(8, 8)),
        TypeError,
        "layer must be",
    ),
    (
        lambda: tf.TransformerBlock(8, 2, 16).load_torch_layer(torch.nn.TransformerEncoderLayer(8, 2, 32)),
        ValueError,
        "dim_feedforward = 16",
    ),
    (lambda: tf.linear_attention(Q5, np.ones((4, 3)), Q5), ValueError, r"K must have shape (5, 3)"),
    (lambda: tf.linear_attention(Q5, Q5, Q5, mode="chunked"), ValueError, "mode must be one of"),
    (lambda: tf.linear_attention(Q5, Q5, Q5, phi=3), TypeError, "phi must be callable"),
    (lambda: tf.linear_attention(Q5, Q5, Q5, phi=np.sum), ValueError, "phi must map"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
