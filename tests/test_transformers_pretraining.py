"""Section 6.3 (pre-training): ELMo's layers against separately run LSTMs and autograd (no leak), the mix against
NumPy, BERT's corruption against its definition and its statistics, the transformer language models' masks by
perturbation, the windowed cross-entropy against F.cross_entropy, the count baselines against a loop, top-k
against sorting, and sampling."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlnotes import transformers as tf
from dlnotes.text import build_vocab

from conftest import bad_input_test

rng = np.random.default_rng(6)


def test_elmo_layers_equal_separately_run_lstms():
    torch.manual_seed(0)
    model = tf.ELMo(20, m=5, n_layers=2).double()
    ids = torch.as_tensor(rng.integers(0, 20, (3, 9)))
    out = model(ids)
    x = model.embed(ids)
    f1 = model.forward_lstms[0](x)[0]
    f2 = model.forward_lstms[1](f1)[0]
    b1 = model.backward_lstms[0](torch.flip(x, [1]))[0]
    b2 = model.backward_lstms[1](b1)[0]
    expected = torch.stack(
        [torch.cat([x, x], -1), torch.cat([f1, b1.flip(1)], -1), torch.cat([f2, b2.flip(1)], -1)], dim=1
    )
    assert out.layers.shape == (3, 3, 9, 10)
    assert torch.allclose(out.layers, expected, atol=1e-12)
    s = torch.softmax(model.w, 0)
    assert torch.allclose(out.elmo, model.gamma * (s[None, :, None, None] * expected).sum(1), atol=1e-12)
    assert torch.allclose(out.logits_next, model.head(f2)) and torch.allclose(
        out.logits_prev, model.head(b2.flip(1))
    )


def test_elmo_no_leak_by_autograd():
    torch.manual_seed(1)
    model = tf.ELMo(10, m=4, n_layers=2).double()
    ids = torch.as_tensor(rng.integers(0, 10, (1, 7)))
    x = model.embed(ids).detach().requires_grad_(True)
    # rerun the stacks on a differentiable embedding
    fwd, bwd = x, x.flip(1)
    for f, b in zip(model.forward_lstms, model.backward_lstms, strict=True):
        fwd, bwd = f(fwd)[0], b(bwd)[0]
    bwd = bwd.flip(1)
    for k in range(7):
        g_f = torch.autograd.grad(fwd[0, k].sum(), x, retain_graph=True)[0][0].abs().sum(1)
        g_b = torch.autograd.grad(bwd[0, k].sum(), x, retain_graph=True)[0][0].abs().sum(1)
        assert torch.all(g_f[k + 1 :] == 0) and torch.all(g_f[: k + 1] > 0)
        assert torch.all(g_b[:k] == 0) and torch.all(g_b[k:] > 0)
    # and the module's own states by perturbation
    ids2 = ids.clone()
    ids2[0, 3] = (ids2[0, 3] + 1) % 10
    with torch.no_grad():
        d = (model(ids2).layers - model(ids).layers).abs()[0, 1:]
    assert d[:, :3, :4].max() == 0 and d[:, 4:, 4:].max() == 0 and d[:, 3].min() > 0


def test_elmo_mix_against_numpy():
    H = rng.normal(size=(3, 5, 4))
    s = rng.random(3)
    assert np.allclose(tf.elmo_mix(H, s, 2.0), 2.0 * np.einsum("j,jtm->tm", s, H))
    assert np.allclose(tf.elmo_mix(H, np.eye(3)[1], 0.5), 0.5 * H[1])


def test_words_vocabulary_and_encoding():
    tokens = "b a b c a b d".split()
    vocab = build_vocab(tokens, min_count=1, size=2, specials=("[UNK]", "[MASK]")).tokens
    assert vocab == ["[UNK]", "[MASK]", "b", "a"]
    assert tf.encode_words(tokens, vocab).tolist() == [2, 3, 2, 0, 3, 2, 0]


def test_mask_tokens_definition_and_statistics():
    ids = rng.integers(0, 40, 200_000)
    out = tf.mask_tokens(ids, 1, 40, rate=0.15, n_special=3, rng=0)
    selected = out.targets >= 0
    assert not selected[ids < 3].any()
    assert np.array_equal(selected, out.masked | out.randomised | out.kept)
    assert not (out.masked & out.randomised).any() and not (out.masked & out.kept).any()
    assert np.array_equal(out.targets[selected], ids[selected])
    assert np.all(out.inputs[out.masked] == 1)
    assert np.array_equal(out.inputs[~out.masked & ~out.randomised], ids[~out.masked & ~out.randomised])
    assert out.inputs[out.randomised].min() >= 3 and out.inputs[out.randomised].max() == 39
    # Hoeffding bounds with probability < 1e-8 of failing
    assert abs(selected[ids >= 3].mean() - 0.15) < 0.01
    shares = np.array([out.masked.sum(), out.randomised.sum(), out.kept.sum()]) / selected.sum()
    assert np.all(np.abs(shares - [0.8, 0.1, 0.1]) < 0.02)
    # the random replacements are uniform over the ordinary ids
    counts = np.bincount(out.inputs[out.randomised], minlength=40)[3:]
    assert counts.min() > 0.5 * counts.mean()
    # any shape, and rate 0 selects nothing
    two_d = tf.mask_tokens(ids[:60].reshape(6, 10), 1, 40, rng=1)
    assert two_d.inputs.shape == (6, 10)
    assert (tf.mask_tokens(ids, 1, 40, rate=0.0, rng=2).targets == -100).all()


@pytest.mark.parametrize("causal", [True, False])
def test_transformer_lm_masks_by_perturbation(causal):
    torch.manual_seed(2)
    model = tf.TinyTransformerLM(12, 16, 2, 2, 10, causal=causal).double().eval()
    ids = torch.as_tensor(rng.integers(0, 12, (2, 10)))
    ids2 = ids.clone()
    ids2[:, 6] = (ids2[:, 6] + 1) % 12
    with torch.no_grad():
        d = (model(ids2).logits - model(ids).logits).abs().amax(dim=(0, 2))
    assert d[6:].min() > 1e-6
    if causal:
        assert d[:6].max() == 0
    else:
        assert d[:6].min() > 1e-6
    assert model(ids[:, :4]).logits.shape == (2, 4, 12)


def test_tied_weights_and_sinusoidal_positions():
    model = tf.TinyGPT(9, 8, 2, 1, 6, tie_weights=True, positions="sinusoidal")
    assert model.head.weight is model.embed.weight
    assert (
        sum(p.numel() for p in model.parameters())
        == sum(p.numel() for p in tf.TinyGPT(9, 8, 2, 1, 6, positions="sinusoidal").parameters()) - 9 * 8
    )
    assert np.allclose(model.P.numpy(), tf.sinusoidal_pe(6, 8), atol=1e-6)
    assert not any(p is model.P for p in model.parameters())


def test_tied_output_layer_starts_with_logits_of_unit_size():
    """The shared matrix at the embedding's default N(0, 1) makes the first logits sqrt(d) = 8 times too large."""
    torch.manual_seed(0)
    ids = torch.as_tensor(rng.integers(0, 500, (8, 32)))
    with torch.no_grad():
        for positions in ("rope", "learned"):
            logits = tf.TinyGPT(500, 64, 4, 2, 32, tie_weights=True, positions=positions)(ids).logits
            assert 0.7 < logits.std().item() < 1.4, positions


def test_windowed_cross_entropy_against_f_cross_entropy():
    torch.manual_seed(3)
    model = tf.TinyGPT(7, 8, 2, 1, 5).double().eval()
    ids = rng.integers(0, 7, 40)
    windows = torch.as_tensor(ids[:36].reshape(6, 6))
    with torch.no_grad():
        expected = F.cross_entropy(model(windows[:, :-1]).logits.reshape(-1, 7), windows[:, 1:].reshape(-1))
    assert abs(tf.windowed_cross_entropy(model, ids, 5) - expected.item()) < 1e-10


def test_ngram_baselines_against_a_loop():
    K = 5
    train, test = rng.integers(0, K - 1, 300), rng.integers(0, K, 50)  # symbol K-1 never seen in training
    result = tf.ngram_baselines(train, test, K, lam=0.9, alpha=0.5)
    counts = np.array([np.sum(train == y) for y in range(K)])
    p = (counts + 0.5) / (len(train) + 0.5 * K)
    uni, bi = [], []
    for c, y in zip(test[:-1], test[1:], strict=True):
        n_c = np.sum(train[:-1] == c)
        n_cy = np.sum((train[:-1] == c) & (train[1:] == y))
        uni.append(-np.log(p[y]))
        bi.append(-np.log(0.9 * n_cy / n_c + 0.1 * p[y] if n_c else p[y]))
    assert np.isclose(result.unigram, np.mean(uni)) and np.isclose(result.bigram, np.mean(bi))


def test_top_k_filter_against_sorting():
    z = rng.normal(size=(4, 9))
    out = tf.top_k_filter(z, 3)
    for row, filtered in zip(z, out, strict=True):
        keep = np.argsort(row)[-3:]
        assert np.array_equal(np.flatnonzero(np.isfinite(filtered)), np.sort(keep))
        assert np.array_equal(filtered[keep], row[keep])
    assert np.array_equal(tf.top_k_filter(z, 9), z)


def test_generate_text_greedy_top_k_and_train_mlm():
    torch.manual_seed(4)
    model = tf.TinyGPT(6, 8, 2, 1, 4).double().eval()
    prompt = np.array([1, 2, 3])
    greedy = tf.generate_text(model, prompt, 5, temperature=0.0)
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(5):
            ids.append(int(model(torch.as_tensor(ids[-4:])[None]).logits[0, -1].argmax()))
    assert greedy.tolist() == ids[3:]
    assert tf.generate_text(model, prompt, 5, temperature=1.0, top_k=1, rng=0).tolist() == greedy.tolist()
    sampled = tf.generate_text(model, prompt, 50, temperature=5.0, rng=0)
    assert len(set(sampled.tolist())) > 2
    bert = tf.TinyBERT(10, 8, 2, 1, 6)
    losses = tf.train_mlm(
        bert, rng.integers(2, 10, 200), 3, mask_id=1, n_special=2, batch_size=4, rng=0, progress=False
    )
    assert losses.shape == (3,) and np.all(np.isfinite(losses)) and bert.training  # the mode it came in
    scored = tf.mlm_predict(bert, rng.integers(2, 10, 30), mask_id=1, n_special=2, repeats=2, rng=0)
    assert scored.predicted.shape == (10, 6) and scored.corrupted.inputs.shape == (10, 6)


GPT = tf.TinyGPT(5, 4, 2, 1, 3)
BERT = tf.TinyBERT(5, 4, 2, 1, 3)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rope"])
def test_kv_cache_gives_the_logits_of_the_full_recomputation(positions):
    torch.manual_seed(4)
    model = tf.TinyGPT(11, 16, 2, 2, 24, positions=positions).double()
    ids = torch.randint(0, 11, (2, 15))
    cache = model.new_cache()
    steps = [model(ids[:, :6], cache).logits] + [model(ids[:, t : t + 1], cache).logits for t in range(6, 15)]
    assert torch.allclose(torch.cat(steps, dim=1), model(ids).logits, atol=1e-12)
    assert cache[0]["K"].shape == (2, 2, 15, 8)
    prompt = [1, 2, 3]
    for kwargs in ({"temperature": 0}, {"temperature": 1.0, "top_p": 0.9, "rng": 5}):
        assert np.array_equal(
            tf.generate_text(model, prompt, 12, cache=True, **kwargs),
            tf.generate_text(model, prompt, 12, **kwargs),
        )


def test_rope_model_is_causal_and_shift_invariant_in_its_scores():
    torch.manual_seed(5)
    model = tf.TinyGPT(9, 16, 2, 1, 20, positions="rope").double()
    ids = torch.randint(0, 9, (1, 12))
    changed = ids.clone()
    changed[0, 7:] = (changed[0, 7:] + 1) % 9
    a, b = model(ids).logits, model(changed).logits
    assert torch.allclose(a[0, :7], b[0, :7]) and not torch.allclose(a[0, 7], b[0, 7])
    assert float(model.P.abs().sum()) == 0.0  # no positions added to the input


def test_top_p_filter_keeps_the_smallest_nucleus():
    z = np.log(np.array([0.05, 0.5, 0.15, 0.3]))
    kept = {p: np.isfinite(tf.top_p_filter(z, p)).tolist() for p in (0.3, 0.6, 0.9, 0.99)}
    assert kept[0.3] == [False, True, False, False]
    assert kept[0.6] == [False, True, False, True]
    assert kept[0.9] == [False, True, True, True]
    assert kept[0.99] == [True] * 4
    Z = rng.normal(size=(5, 12))
    filtered = tf.top_p_filter(Z, 0.7)
    for row, out in zip(Z, filtered, strict=True):
        p = np.sort(np.exp(row) / np.exp(row).sum())[::-1]
        n = int(np.searchsorted(np.cumsum(p), 0.7) + 1)  # the fewest tokens with mass >= 0.7
        assert np.isfinite(out).sum() == n and np.array_equal(out[np.isfinite(out)], row[np.isfinite(out)])


def test_train_lm_warms_up_and_lowers_the_loss():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = tf.warmup_cosine(opt, 20, 5, floor=0.1)
    rates = []
    for _ in range(20):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    assert np.allclose(rates[:5], [0.2, 0.4, 0.6, 0.8, 1.0]) and abs(rates[-1] - 0.1) < 0.01
    assert all(a >= b for a, b in zip(rates[4:], rates[5:], strict=False))
    torch.manual_seed(0)
    ids = np.tile(np.arange(6), 60)  # a periodic text: the next token is determined
    model = tf.TinyGPT(6, 16, 2, 1, 12)
    bits = tf.train_lm(model, ids, 60, seq_len=12, batch_size=8, lr=1e-2, warmup=10, rng=0, progress=False)
    assert bits[-5:].mean() < 0.3 * bits[:5].mean()


BAD_INPUT = [  # (call, error, message)
    (lambda: tf.top_p_filter(np.ones(3), 0.0), ValueError, "p must"),
    (lambda: tf.top_p_filter(np.ones(3), 1.5), ValueError, "p must"),
    (
        lambda: tf.warmup_cosine(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), 5, 6),
        ValueError,
        "warmup",
    ),
    (lambda: tf.warmup_cosine("adam", 5, 1), TypeError, "optimizer must be a torch optimizer"),
    (
        lambda: tf.train_lm(tf.TinyGPT(4, 8, 2, 1, 8), np.arange(4), 1, seq_len=8),
        ValueError,
        "more than seq_len",
    ),
    (lambda: tf.train_lm(tf.TinyGPT(4, 8, 2, 1, 8), np.arange(40) % 4, 1, lr=0), ValueError, "lr"),
    (
        lambda: tf.generate_text(tf.TinyGPT(4, 8, 2, 1, 8), [1, 2], 7, cache=True),
        ValueError,
        "at most T = 8 tokens",
    ),
    (
        lambda: tf.TinyGPT(4, 8, 2, 1, 8)(torch.zeros(1, 3, dtype=torch.long), [{}, {}]),
        ValueError,
        "cache must be",
    ),
    (lambda: tf.TinyGPT(4, 8, 2, 1, 8, positions="alibi"), ValueError, "positions must be one of"),
    (lambda: tf.ELMo(1), ValueError, "vocab_size"),
    (
        lambda: tf.ELMo(5)(torch.zeros(3, dtype=torch.long)),
        ValueError,
        r"ids must be an integer tensor (B, T)",
    ),
    (lambda: tf.ELMo(5)(torch.full((1, 3), 7)), ValueError, r"token ids in 0..4"),
    (lambda: tf.elmo_mix(np.ones((3, 4)), np.ones(2)), ValueError, r"s must have shape (3,)"),
    (lambda: tf.elmo_mix(np.ones(3), np.ones(3)), ValueError, r"H must have shape (J, ..., m)"),
    (lambda: tf.encode_words(["a"], ["a", "b"]), ValueError, "unknown-word token"),
    (lambda: tf.mask_tokens(np.array([0.5]), 1, 5), TypeError, "ids must be a non-empty integer array"),
    (lambda: tf.mask_tokens(np.array([7]), 1, 5), ValueError, r"ids must lie in 0..4"),
    (lambda: tf.mask_tokens(np.array([1]), 1, 5, rate=1.5), ValueError, "rate"),
    (lambda: tf.mask_tokens(np.array([1]), 9, 5), ValueError, "mask_id"),
    (lambda: tf.TinyGPT(5, 4, 3, 1, 3), ValueError, "h must divide d"),
    (lambda: tf.TinyGPT(5, 4, 2, 1, 3, positions="rotary"), ValueError, "positions must be one of"),
    (lambda: GPT(torch.zeros((1, 4), dtype=torch.long)), ValueError, "at most T = 3"),
    (lambda: tf.train_mlm(BERT, np.arange(5), 0, mask_id=1), ValueError, "steps"),
    (lambda: tf.train_mlm(BERT, np.arange(2), 1, mask_id=1), ValueError, "at least seq_len"),
    (lambda: tf.train_mlm(BERT, np.arange(5), 1, mask_id=1, clip_grad_norm=0), ValueError, "clip_grad_norm"),
    (lambda: tf.mlm_predict(BERT, np.arange(5), mask_id=1, repeats=0), ValueError, "repeats"),
    (lambda: tf.windowed_cross_entropy(GPT, np.arange(3), 3), ValueError, r"at least T + 1"),
    (
        lambda: tf.windowed_cross_entropy(torch.nn.Linear(2, 2), np.arange(3), 1),
        TypeError,
        "model.vocab_size",
    ),
    (lambda: tf.ngram_baselines(np.arange(3), np.array([1]), 3), ValueError, "at least 2 tokens"),
    (lambda: tf.ngram_baselines(np.arange(3), np.arange(3), 3, lam=2), ValueError, "lam"),
    (lambda: tf.top_k_filter(np.ones(3), 4), ValueError, "k must"),
    (lambda: tf.top_k_filter(np.float64(1.0), 1), ValueError, "at least one axis"),
    (lambda: tf.generate_text(BERT, np.array([1]), 2), TypeError, "causal"),
    (lambda: tf.generate_text(GPT, np.array([1]), 2, top_k=6), ValueError, "top_k"),
    (lambda: tf.generate_text(GPT, np.array([1]), 2, temperature=-1), ValueError, "temperature"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
