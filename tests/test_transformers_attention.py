"""Section 6.1: scaled dot-product attention against F.scaled_dot_product_attention, multi-head attention (NumPy
and the torch module) against nn.MultiheadAttention with copied weights, the causal mask convention, row entropy."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlnotes import transformers as tf

from conftest import bad_input_test

rng = np.random.default_rng(61)


def torch_mha(d, h, bias=True):
    torch.manual_seed(3)
    mha = torch.nn.MultiheadAttention(d, h, bias=bias, batch_first=True).double()
    with torch.no_grad():
        for p in mha.parameters():
            p.normal_(0, 0.4)
    return mha


def test_causal_mask_is_true_where_attending_is_allowed():
    m = tf.causal_mask(4)
    assert m.dtype == bool and m.shape == (4, 4)
    assert all(m[i, j] == (j <= i) for i in range(4) for j in range(4))
    # same convention as F.scaled_dot_product_attention(is_causal=True)
    Q, K, V = (torch.tensor(rng.normal(size=(5, 3))) for _ in range(3))
    expected = F.scaled_dot_product_attention(Q, K, V, is_causal=True).numpy()
    by_mask = F.scaled_dot_product_attention(Q, K, V, attn_mask=torch.tensor(tf.causal_mask(5))).numpy()
    assert np.allclose(by_mask, expected, atol=1e-12)


@pytest.mark.parametrize("masked", [False, True])
def test_attention_equals_torch_sdpa(masked):
    Q, K = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    V = rng.normal(size=(6, 3))
    mask = tf.causal_mask(6) if masked else None
    out, A = tf.attention(Q, K, V, mask)
    t = [torch.tensor(M) for M in (Q, K, V)]
    expected = F.scaled_dot_product_attention(*t, attn_mask=None if mask is None else torch.tensor(mask))
    assert np.allclose(out, expected.numpy(), atol=1e-12)
    assert np.allclose(A.sum(axis=1), 1) and (A >= 0).all()
    if masked:
        assert (A[~mask] == 0).all()
    # beta is the inverse temperature: beta = 2 equals torch with scale=2
    out2 = tf.attention(Q, K, V, beta=2.0).out
    assert np.allclose(out2, F.scaled_dot_product_attention(*t, scale=2.0).numpy(), atol=1e-12)


def test_attention_cross_shapes():
    out, A = tf.attention(rng.normal(size=(3, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 2)))
    assert out.shape == (3, 2) and A.shape == (3, 7)


def test_row_entropy_against_direct_formula():
    A = np.array([[1.0, 0, 0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.25, 0.25]])
    assert np.allclose(tf.row_entropy(A), [0, np.log(3), -(0.5 * np.log(0.5) + 0.5 * np.log(0.25))])


@pytest.mark.parametrize(("h", "bias", "masked"), [(1, True, False), (2, True, True), (4, False, False)])
def test_multi_head_attention_equals_torch(h, bias, masked):
    d, T = 8, 5
    mha = torch_mha(d, h, bias)
    X = rng.normal(size=(T, d))
    mask = tf.causal_mask(T) if masked else None
    out, A = tf.multi_head_attention(X, X, **tf.weights_from_torch_mha(mha), h=h, mask=mask)
    x = torch.tensor(X)[None]
    expected, weights = mha(
        x, x, x, attn_mask=None if mask is None else torch.tensor(~mask), average_attn_weights=False
    )  # nn.MultiheadAttention: True = masked out
    assert np.allclose(out, expected[0].detach().numpy(), atol=1e-10)
    assert np.allclose(A, weights[0].detach().numpy(), atol=1e-10)


def test_multi_head_cross_attention_equals_torch():
    d, h = 6, 3
    mha = torch_mha(d, h)
    A_seq, B_seq = rng.normal(size=(4, d)), rng.normal(size=(9, d))
    out, A = tf.multi_head_attention(A_seq, B_seq, **tf.weights_from_torch_mha(mha), h=h)
    expected = mha(torch.tensor(A_seq)[None], torch.tensor(B_seq)[None], torch.tensor(B_seq)[None])[0][0]
    assert out.shape == (4, d) and A.shape == (h, 4, 9)
    assert np.allclose(out, expected.detach().numpy(), atol=1e-10)


@pytest.mark.parametrize("bias", [True, False])
def test_torch_module_equals_nn_multihead_attention(bias):
    d, h, T = 8, 2, 6
    mha = torch_mha(d, h, bias)
    mine = tf.MultiHeadAttention(d, h, bias=bias).double().load_torch_mha(mha)
    x = torch.tensor(rng.normal(size=(3, T, d)))
    mask = tf.causal_mask(T)
    out, A = mine(x, mask=torch.tensor(mask))
    expected, weights = mha(x, x, x, attn_mask=torch.tensor(~mask), average_attn_weights=False)
    assert out.shape == (3, T, d) and A.shape == (3, h, T, T)
    assert torch.allclose(out, expected, atol=1e-10) and torch.allclose(A, weights, atol=1e-10)
    # numpy mask, unbatched input, and the NumPy function agree
    out1, A1 = mine(x[0], mask=mask)
    assert torch.allclose(out1, expected[0], atol=1e-10) and A1.shape == (h, T, T)
    np_out = tf.multi_head_attention(
        x[0].numpy(), x[0].numpy(), **tf.weights_from_torch_mha(mha), h=h, mask=mask
    )
    assert np.allclose(np_out.out, expected[0].detach().numpy(), atol=1e-10)
    # cross-attention and gradients
    y = torch.tensor(rng.normal(size=(3, 4, d)))
    out_x, _ = mine(y, x)
    assert torch.allclose(out_x, mha(y, x, x)[0], atol=1e-10)
    out_x.sum().backward()
    assert mine.W_Q.weight.grad is not None


def test_parameter_count_does_not_depend_on_h():
    counts = {h: sum(p.numel() for p in tf.MultiHeadAttention(12, h).parameters()) for h in (1, 2, 3, 4, 6)}
    assert set(counts.values()) == {4 * (12 * 12 + 12)}


X5 = np.ones((5, 4))
W44 = np.ones((4, 4))

BAD_INPUT = [  # (call, error, message)
    (lambda: tf.causal_mask(0), ValueError, "T must be an int"),
    (lambda: tf.attention(X5, np.ones((5, 3)), X5), ValueError, r"K must have shape (any, 4)"),
    (lambda: tf.attention(X5, X5, np.ones((4, 2))), ValueError, r"V must have shape (5, any)"),
    (lambda: tf.attention(X5, X5, X5, beta=0.0), ValueError, "beta"),
    (lambda: tf.attention(X5, X5, X5, mask=np.ones((5, 5))), TypeError, "mask must be a bool"),
    (
        lambda: tf.attention(X5, X5, X5, mask=np.ones((5, 4), bool)),
        ValueError,
        r"mask must have shape (5, 5)",
    ),
    (lambda: tf.attention(X5, X5, X5, mask=np.zeros((5, 5), bool)), ValueError, "at least one key"),
    (lambda: tf.row_entropy(np.ones((2, 2))), ValueError, "sum to 1"),
    (lambda: tf.multi_head_attention(X5, X5, W44, W44, W44, W44, h=3), ValueError, "h must divide"),
    (lambda: tf.multi_head_attention(X5, X5, W44, W44[:3], W44, W44, h=2), ValueError, "W_K must have shape"),
    (
        lambda: tf.multi_head_attention(X5, X5, W44, W44, W44, W44, h=2, biases={"b_X": 1}),
        ValueError,
        "biases may hold only",
    ),
    (
        lambda: tf.multi_head_attention(X5, X5, W44, W44, W44, W44, h=2, biases={"b_Q": np.ones(3)}),
        ValueError,
        r"b_Q must have shape (4,)",
    ),
    (lambda: tf.weights_from_torch_mha(torch.nn.Linear(2, 2)), TypeError, "nn.MultiheadAttention"),
    (lambda: tf.MultiHeadAttention(6, 4), ValueError, "h must divide"),
    (lambda: tf.MultiHeadAttention(4, 2)(torch.ones(3, 5)), ValueError, "x_q must be a tensor"),
    (lambda: tf.MultiHeadAttention(4, 2)(torch.ones(3, 4), torch.ones(2, 3, 4)), ValueError, "x_kv must be"),
    (
        lambda: tf.MultiHeadAttention(4, 2)(torch.ones(3, 4), mask=torch.ones(3, 3)),
        TypeError,
        "mask must be a bool",
    ),
    (
        lambda: tf.MultiHeadAttention(4, 2)(torch.ones(3, 4), mask=np.ones((2, 2), bool)),
        ValueError,
        "broadcast",
    ),
    (
        lambda: tf.MultiHeadAttention(4, 2).load_torch_mha(torch.nn.MultiheadAttention(4, 1)),
        ValueError,
        "num_heads",
    ),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
