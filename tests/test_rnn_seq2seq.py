"""Section 5.5, sequence to sequence and attention: the reversal task, the GRU encoder–decoder (checked against a
NumPy re-implementation from its own weights), additive attention, training, evaluation and the alignment plot."""

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from dlnotes.rnn import seq2seq
from dlnotes.rnn.gated import GRUCell
from dlnotes.widgets.rnn import alignment_explorer, plot_alignment

from conftest import bad_input_test

rng = np.random.default_rng(11)


def small_model(attention, vocab=4, hidden=6, embed=3, seed=0):
    torch.manual_seed(seed)
    return seq2seq.Seq2Seq(vocab, hidden, attention=attention, embed=embed).double().eval()


def numpy_log_prob(model, x, y):
    """log p(y | x) one prefix at a time, from the model's weights with NumPy: the GRU steps by
    dlnotes.GRUCell, the attention scores v^T tanh(W_z z + W_zeta zeta_j + b) and their softmax written out."""
    weight = {name: p.detach().numpy() for name, p in model.named_parameters()}
    n_embed = weight["source_embedding.weight"].shape[1]
    encoder = GRUCell(n_embed, model.hidden).load_torch(model.encoder)
    decoder = GRUCell(model.decoder.input_size, model.hidden).load_torch(model.decoder)
    z, states = None, []
    for token in x:
        z = encoder.forward(weight["source_embedding.weight"][token], z)
        states.append(z)
    states = np.array(states)
    y_prev, log_p = model.vocab, 0.0
    for y_i in y:
        inputs = weight["target_embedding.weight"][y_prev]
        if model.attention:
            scores = np.tanh(
                weight["W_z.weight"] @ z + states @ weight["W_zeta.weight"].T + weight["W_zeta.bias"]
            )
            a = np.exp(scores @ weight["v.weight"][0])
            c = (a / a.sum()) @ states
            inputs = np.concatenate([inputs, c])
        z = decoder.forward(inputs, z)
        logits = (
            weight["output.weight"] @ (np.concatenate([z, c]) if model.attention else z)
            + weight["output.bias"]
        )
        log_p += logits[y_i] - np.log(np.sum(np.exp(logits)))
        y_prev = y_i
    return log_p


def test_make_reverse_task_reverses_and_excludes():
    task = seq2seq.make_reverse_task(50, 6, vocab=7, rng=0)
    assert task.X.shape == task.Y.shape == (50, 6) and task.X.min() >= 0 and task.X.max() <= 6
    assert np.array_equal(task.Y, task.X[:, ::-1])
    every = np.array(list(itertools.product(range(3), repeat=2)))  # all 9 strings of length 2 over 3 symbols
    held_out = seq2seq.make_reverse_task(20, 2, vocab=3, rng=1, exclude=every[:7])
    assert {tuple(row) for row in held_out.X} <= {tuple(every[7]), tuple(every[8])}


@pytest.mark.parametrize("attention", [False, True])
def test_sequence_log_prob_is_the_product_of_one_step_conditionals(attention):
    model = small_model(attention)
    X, Y = rng.integers(4, size=(3, 5)), rng.integers(4, size=(3, 4))  # output length differs from input's
    ours = model.sequence_log_prob(torch.tensor(X), torch.tensor(Y)).detach().numpy()
    reference = [numpy_log_prob(model, x, y) for x, y in zip(X, Y, strict=True)]
    assert np.allclose(ours, reference, atol=1e-10)


@pytest.mark.parametrize("attention", [False, True])
def test_the_probabilities_of_all_outputs_sum_to_one(attention):
    model = small_model(attention, vocab=3)
    outputs = torch.tensor(list(itertools.product(range(3), repeat=3)))  # all 27 outputs of length 3
    x = torch.tensor(rng.integers(3, size=(1, 4))).expand(len(outputs), -1)
    total = model.sequence_log_prob(x, outputs).exp().sum().item()
    assert abs(total - 1) < 1e-12


def test_teacher_forcing_does_not_look_ahead():
    model = small_model(True)
    x, y = torch.tensor(rng.integers(4, size=(2, 5))), torch.tensor(rng.integers(4, size=(2, 6)))
    y_changed = y.clone()
    y_changed[:, 3] = (y[:, 3] + 1) % 4
    before, after = model(x, y), model(x, y_changed)
    assert torch.equal(before[:, :4], after[:, :4]) and not torch.allclose(before[:, 4], after[:, 4])


@pytest.mark.parametrize("attention", [False, True])
def test_greedy_decoding_takes_the_argmax_of_its_own_prefix(attention):
    model = small_model(attention)
    x = torch.tensor(rng.integers(4, size=(5, 6)))
    tokens, weights = model.greedy_decode(x, 7)
    assert tokens.shape == (5, 7)
    assert torch.equal(model(x, tokens).argmax(dim=-1), tokens)  # teacher forcing on its own output
    assert (weights is None) == (not attention)
    if attention:
        assert weights.shape == (5, 7, 6) and torch.allclose(
            weights.sum(dim=-1), torch.ones(5, 7, dtype=torch.float64)
        )


def test_attend_is_the_additive_attention_formula():
    model = small_model(True)
    states = torch.tensor(rng.normal(size=(3, 5, 6)))
    z = torch.tensor(rng.normal(size=(3, 6)))
    weights, context = model.attend(z, states)
    assert torch.allclose(weights.sum(dim=1), torch.ones(3, dtype=torch.float64), atol=1e-12)
    W_z, W_zeta = model.W_z.weight.detach().numpy(), model.W_zeta.weight.detach().numpy()
    b, v = model.W_zeta.bias.detach().numpy(), model.v.weight.detach().numpy()[0]
    for k in range(3):
        zeta = states[k].numpy()
        scores = np.array([v @ np.tanh(W_z @ z[k].numpy() + W_zeta @ zeta_j + b) for zeta_j in zeta])
        a = np.exp(scores) / np.exp(scores).sum()
        assert np.allclose(weights[k].detach().numpy(), a, atol=1e-12)
        assert np.allclose(
            context[k].detach().numpy(), sum(a_j * zeta_j for a_j, zeta_j in zip(a, zeta, strict=True))
        )


def test_attention_context_equals_torch_softmax():
    scores, states = rng.normal(size=(4, 7)) * 30, rng.normal(size=(7, 3))  # large scores: no overflow
    weights, context = seq2seq.attention_context(scores, states)
    reference = torch.softmax(torch.tensor(scores), dim=1).numpy()
    assert np.allclose(weights, reference, atol=1e-12) and np.allclose(weights.sum(axis=1), 1)
    assert np.allclose(context, reference @ states)


def test_training_lowers_the_loss_and_evaluation_counts_right_symbols():
    torch.manual_seed(0)
    model = seq2seq.Seq2Seq(5, 16, attention=True)
    task = seq2seq.make_reverse_task(500, 3, vocab=5, rng=0)
    losses = seq2seq.train_seq2seq(model, task.X, task.Y, steps=60, rng=0, progress=False)
    assert len(losses) == 60 and np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    score = seq2seq.evaluate_seq2seq(model, task.X[:50], task.Y[:50])
    assert model.training  # both leave the model in the mode it came in
    right = score.prediction == task.Y[:50]
    assert score.token_accuracy == pytest.approx(right.mean()) and score.exact_match == pytest.approx(
        right.all(axis=1).mean()
    )
    assert np.allclose(score.per_position, right.mean(axis=0)) and score.attention.shape == (50, 3, 3)


def test_plot_alignment_labels_the_axes_with_the_symbols():
    A = rng.dirichlet(np.ones(4), size=3)
    fig, ax = plt.subplots()
    plot_alignment(A, [1, 2, 3, 4], [4, 3, 9], ax=ax, target=[4, 3, 2])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["4", "3", "9"]
    assert ax.get_xlabel() and ax.get_ylabel()
    plt.close(fig)


def test_alignment_explorer_shows_a_given_model():
    box = alignment_explorer(small_model(True).float(), length=5, n_strings=3)
    assert len(box.children[0].children[0].options) == 3


# ----------------------------------------------------------------------------- bad input

BAD_INPUT = [  # (call, error, message)
    (lambda: seq2seq.make_reverse_task(0, 5), ValueError, "n must be an int"),
    (lambda: seq2seq.make_reverse_task(5, 5, vocab=1), ValueError, "vocab must be an int"),
    (lambda: seq2seq.make_reverse_task(5, 1, vocab=2, exclude=[[0], [1]]), ValueError, "nothing is left"),
    (
        lambda: seq2seq.make_reverse_task(5, 2, exclude=np.zeros((3, 4), int)),
        ValueError,
        r"exclude must have shape",
    ),
    (lambda: seq2seq.Seq2Seq(1, 8), ValueError, "vocab must be an int"),
    (lambda: seq2seq.Seq2Seq(10, 8, attention="yes"), ValueError, "attention must be one of"),
    (lambda: small_model(False).encode(np.array([[0.5, 1.0]])), TypeError, "integer token ids"),
    (lambda: small_model(False).encode(np.array([[0, 9]])), ValueError, r"token ids in 0..3"),
    (lambda: small_model(False).encode(np.array([0, 1])), ValueError, r"x must have shape (batch, length)"),
    (lambda: small_model(False)(np.zeros((2, 3), int), np.zeros((3, 3), int)), ValueError, "same number"),
    (lambda: small_model(False).attend(torch.zeros(1, 6), torch.zeros(1, 3, 6)), ValueError, "no attention"),
    (lambda: small_model(True).attend(torch.zeros(2, 6), torch.zeros(1, 3, 6)), ValueError, "z must be"),
    (lambda: small_model(False).greedy_decode(np.zeros((1, 3), int), 0), ValueError, "n must be an int"),
    (
        lambda: seq2seq.attention_context(np.zeros((2, 3)), np.zeros((4, 2))),
        ValueError,
        r"states must have shape",
    ),
    (
        lambda: seq2seq.train_seq2seq(
            small_model(False), np.zeros((4, 3), int), np.zeros((5, 3), int), steps=1
        ),
        ValueError,
        "same number",
    ),
    (
        lambda: seq2seq.train_seq2seq(
            small_model(False), np.zeros((4, 3), int), np.zeros((4, 3), int), steps=0
        ),
        ValueError,
        "steps must be an int",
    ),
    (lambda: plot_alignment(np.ones((2, 3)), [1, 2], [1, 2]), ValueError, r"A must have shape (2, 2)"),
    (lambda: alignment_explorer(small_model(False)), TypeError, "attention=True"),
    (lambda: alignment_explorer(small_model(True), n_strings=9), ValueError, "n_strings"),
]


test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)
