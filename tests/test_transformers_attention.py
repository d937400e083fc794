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


@pytest.mark.parametrize("block", [1, 7, 64, 500])
def test_tiled_attention_equals_attention(block):
    Q, K, V = rng.normal(size=(40, 8)) * 3, rng.normal(size=(90, 8)) * 3, rng.normal(size=(90, 5))
    assert np.allclose(tf.tiled_attention(Q, K, V, block=block), tf.attention(Q, K, V).out, atol=1e-12)
    assert np.allclose(
        tf.tiled_attention(Q, K, V, block=block, beta=2.0), tf.attention(Q, K, V, beta=2.0).out, atol=1e-12
    )


def test_tiled_attention_memory_grows_linearly_where_attention_grows_quadratically():
    import tracemalloc

    peaks = {"full": [], "tiled": []}
    for T in (256, 1024):
        Q, K, V = rng.normal(size=(3, T, 16))
        for name, run in (("full", tf.attention), ("tiled", tf.tiled_attention)):
            tracemalloc.start()
            run(Q, K, V)
            peaks[name].append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    assert peaks["full"][1] > 12 * peaks["full"][0]  # x 16 for T x 4
    assert peaks["tiled"][1] < 6 * peaks["tiled"][0]  # the output (T, d_v) grows x 4


def test_padding_mask_hides_the_padded_keys():
    torch.manual_seed(3)
    mha = tf.MultiHeadAttention(8, 2).double()
    lengths = [6, 4, 1]
    mask = tf.padding_mask(lengths, 6)
    assert mask.shape == (3, 1, 1, 6) and mask[1, 0, 0].tolist() == [True] * 4 + [False] * 2
    x = torch.randn(3, 6, 8, dtype=torch.float64)
    changed = x.clone()
    changed[1, 4:], changed[2, 1:] = 7.0, -3.0  # other padding values
    out, A = mha(x, mask=mask)
    for b, n in enumerate(lengths):
        assert torch.allclose(out[b, :n], mha(changed, mask=mask)[0][b, :n], atol=1e-12)
        assert torch.allclose(out[b, :n], mha(x[b, :n])[0], atol=1e-12)  # = the unpadded sequence alone
        assert (A[b, :, :, n:] == 0).all()


def test_rope_scores_depend_on_the_offset_only_and_equal_the_pe_rotation_identity():
    q, k = torch.randn(2, 10, 8, dtype=torch.float64)
    Q, K = tf.rope(q), tf.rope(k)
    S = Q @ K.T  # S[t, j] = rotated q_t . rotated k_j
    q0, k0 = q[0], k[0]
    same = tf.rope(q0.expand(10, 8)) @ tf.rope(k0.expand(10, 8)).T  # one q and one k at every position
    for delta in (-3, 0, 2, 5):
        diagonal = torch.diagonal(same, offset=delta)
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-12)
        R = torch.as_tensor(tf.pe_rotation(delta, 8))
        assert torch.allclose(diagonal[0], q0 @ R @ k0, atol=1e-12)
    assert torch.allclose(tf.rope(q[3:], start=3), Q[3:], atol=1e-12)  # start = the first position
    assert torch.allclose(S.diagonal(), (q * k).sum(1), atol=1e-12)  # no rotation between equal positions
    assert torch.allclose(Q.norm(dim=1), q.norm(dim=1))  # a rotation


BAD_INPUT = [  # (call, error, message)
    (
        lambda: tf.tiled_attention(np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 1)), block=0),
        ValueError,
        "block",
    ),
    (lambda: tf.tiled_attention(np.ones((3, 2)), np.ones((4, 3)), np.ones((4, 1))), ValueError, "K must"),
    (lambda: tf.padding_mask([3, 0], 4), ValueError, "lengths must lie in 1..T = 4"),
    (lambda: tf.padding_mask([[3]], 4), ValueError, "lengths"),
    (lambda: tf.rope(torch.ones(4, 3)), ValueError, "even d_k"),
    (lambda: tf.rope(torch.ones(4, 2), start=-1), ValueError, "start"),
    (lambda: tf.MultiHeadAttention(6, 2, rope=True), ValueError, "even d_k"),
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
