from collections import Counter

import numpy as np
import scipy.stats
import torch

from dlnotes.rnn import language
from dlnotes.rnn.gated import LSTMCell

from conftest import bad_input_test

rng = np.random.default_rng(7)
TEXT = "It is a truth universally acknowledged, that a single man in possession of a good fortune."


# ----------------------------------------------------------------------------- language models


def test_vocabulary_encode_decode_round_trip():
    vocabulary = language.char_vocabulary(TEXT)
    assert list(vocabulary) == sorted(set(TEXT))
    ids = language.encode_chars(TEXT, vocabulary)
    assert ids.dtype == np.int64 and [vocabulary[k] for k in ids] == list(TEXT)
    assert language.decode_chars(ids, vocabulary) == TEXT


def test_conditional_entropy_against_scipy():
    ids = rng.integers(0, 5, 2000) ** 2 % 7  # uneven frequencies, symbols 0..6
    counts = np.bincount(ids, minlength=7)
    assert np.isclose(language.conditional_entropy(ids, 7), scipy.stats.entropy(counts, base=2), atol=1e-12)
    joint = np.zeros((7, 7))
    np.add.at(joint, (ids[:-1], ids[1:]), 1)
    H_joint = scipy.stats.entropy(joint.ravel(), base=2)
    H_context = scipy.stats.entropy(joint.sum(axis=1), base=2)
    assert np.isclose(language.conditional_entropy(ids, 7, context=1), H_joint - H_context, atol=1e-12)
    periodic = np.tile([0, 1, 2], 100)  # fully predictable from one symbol back
    assert np.isclose(language.conditional_entropy(periodic, 3, context=1), 0, atol=1e-12)


def test_conditional_entropy_with_a_large_vocabulary_counts_whole_windows():
    """65536**5 = 2**80 does not fit an int64: coding each window as one number in base n_symbols would
    wrap and merge contexts that differ in their first symbol (the entropy would come out too small)."""
    ids = rng.integers(0, 4, 5000) * 16384  # symbols 0, 16384, 32768, 49152 of a 65536-symbol alphabet
    windows = Counter(tuple(ids[t : t + 5]) for t in range(len(ids) - 4))
    contexts = Counter(tuple(ids[t : t + 4]) for t in range(len(ids) - 4))
    n = len(ids) - 4
    H = -sum(c / n * np.log2(c / n) for c in windows.values()) + sum(
        c / n * np.log2(c / n) for c in contexts.values()
    )
    assert np.isclose(language.conditional_entropy(ids, 65536, context=4), H, atol=1e-12)


def small_lm(K=6, hidden=5, embedding=3):
    torch.manual_seed(3)
    return language.CharLSTM(K, hidden, embedding).double()


def test_char_lstm_equals_the_lecture_lstm_cell():
    model = small_lm()
    ids = torch.as_tensor(rng.integers(0, 6, (1, 9)))
    out = model(ids)
    cell = LSTMCell(3, 5).load_torch(model.lstm)
    E = model.embed.weight.detach().numpy()
    W, b = model.W.weight.detach().numpy(), model.W.bias.detach().numpy()
    state = None
    for t in range(9):
        state = cell.forward(E[ids[0, t]], state)
        assert np.allclose(out.Z[0, t].detach().numpy(), state[0], atol=1e-12)
        assert np.allclose(out.logits[0, t].detach().numpy(), W @ state[0] + b, atol=1e-12)
    assert np.allclose(out.state[0][0, 0].detach().numpy(), state[0]) and np.allclose(
        out.state[1][0, 0].detach().numpy(), state[1]
    )


def test_teacher_forced_logits_do_not_see_the_future():
    model = small_lm()
    ids = torch.as_tensor(rng.integers(0, 6, (2, 12)))
    changed = ids.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 6
    a, b = model(ids).logits, model(changed).logits
    assert torch.equal(a[:, :7], b[:, :7]) and not torch.allclose(a[:, 7], b[:, 7])


def test_bits_per_character_is_the_mean_cross_entropy_in_bits():
    model = small_lm()
    ids = rng.integers(0, 6, 203)
    rows, length = 4, 203 // 4
    pieces = ids[: rows * length].reshape(rows, length)
    with torch.no_grad():
        logits = model(torch.as_tensor(pieces[:, :-1])).logits.numpy()
    log_p = logits - scipy.special.logsumexp(logits, axis=2, keepdims=True)
    expected = -np.mean(np.take_along_axis(log_p, pieces[:, 1:, None], axis=2)) / np.log(2)
    assert np.isclose(language.bits_per_character(model, ids, rows=rows), expected, atol=1e-12)


def test_training_learns_a_periodic_text():
    torch.manual_seed(0)
    model = language.CharLSTM(4, hidden=16, embedding=4)
    ids = np.tile([0, 1, 2, 3, 2, 1], 200)
    model.eval()  # the trainer puts it in training mode for the steps, then back
    losses = language.train_char_lm(
        model, ids, steps=150, seq_len=12, batch_size=8, lr=2e-2, rng=0, progress=False
    )
    assert losses[:5].mean() > 1.5 and losses[-10:].mean() < 0.1  # log2(4) = 2 at the start
    assert losses.shape == (150,) and not model.training
    assert language.bits_per_character(model, ids, rows=4) < 0.1


def test_greedy_generation_equals_rerunning_on_each_prefix():
    model = small_lm()
    prefix = rng.integers(0, 6, (3, 4))
    generated = language.generate(model, prefix, 6)
    sequence = torch.as_tensor(prefix)
    for t in range(6):
        with torch.no_grad():
            out = model(sequence)
        assert np.array_equal(generated.ids[:, t], out.logits[:, -1].argmax(dim=1).numpy())
        assert np.allclose(generated.Z[:, t], out.Z[:, -1].numpy(), atol=1e-12)
        sequence = torch.cat([sequence, torch.as_tensor(generated.ids[:, t : t + 1])], dim=1)


def test_sampling_follows_the_softmax_at_the_temperature():
    model = small_lm()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.W.bias.copy_(torch.tensor([2.0, 1.0, 0.0, -1.0, 0.5, 0.0]))  # the same logits at every step
    draws = language.generate(model, np.zeros((20000, 1), dtype=np.int64), 1, temperature=2.0, rng=1).ids[
        :, 0
    ]
    expected = torch.softmax(model.W.bias.detach() / 2.0, dim=0).numpy()
    assert np.abs(np.bincount(draws, minlength=6) / 20000 - expected).max() < 0.015
    text = language.sample(model, "ab", 5, "abcdef", temperature=1.0, rng=0)
    assert len(text) == 5 and set(text) <= set("abcdef")


# ----------------------------------------------------------------------------- bad input

LM = language.CharLSTM(4, 3, 2)

BAD_INPUT = [  # (call, error, message)
    (lambda: language.char_vocabulary(""), TypeError, "non-empty str"),
    (lambda: language.encode_chars("abz", "ab"), ValueError, "not in the vocabulary: 'z'"),
    (lambda: language.decode_chars([0, 5], "ab"), ValueError, r"ids must hold labels in 0..1"),
    (lambda: language.conditional_entropy([0, 1, 2], 2), ValueError, "ids must hold labels in 0..1"),
    (lambda: language.conditional_entropy([0, 1], 2, context=2), ValueError, "longer than context"),
    (lambda: language.CharLSTM(1), ValueError, "vocab_size"),
    (lambda: LM(torch.zeros(3, dtype=torch.int64)), ValueError, r"(batch, time)"),
    (lambda: LM(torch.tensor([[0, 4]])), ValueError, r"ids must lie in 0..3"),
    (lambda: LM([[0, 1]]), TypeError, "ids must be an int64 tensor"),
    (lambda: language.train_char_lm(LM, [0, 1, 2], steps=1, seq_len=4), ValueError, "more than seq_len"),
    (lambda: language.train_char_lm(LM, [0, 1, 2] * 9, steps=0), ValueError, "steps"),
    (
        lambda: language.train_char_lm(LM, [0, 1, 2] * 9, steps=1, seq_len=4, clip_grad_norm=-1.0),
        ValueError,
        "clip_grad_norm",
    ),
    (lambda: language.bits_per_character(LM, [0, 1, 7]), ValueError, "ids must hold labels in 0..3"),
    (lambda: language.generate(LM, [0, 1], 3), ValueError, r"prefix must have shape (batch, length)"),
    (lambda: language.generate(LM, [[0, 1]], 3, temperature=-1.0), ValueError, "temperature"),
    (lambda: language.sample(LM, "ab", 3, "abcde"), ValueError, "vocabulary must have the model's 4"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
