"""Chapter 05, section 5.5 (notebook 05_seq2seq_attention): the string-reversal task, a GRU encoder–decoder
with and without additive (Bahdanau) attention, its training by teacher forcing (`train_seq2seq`, also used
for chapter 06's transformer) and greedy-decoding evaluation.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..activations import softmax
from ..text import check_tokens, random_strings
from ..training import to_numpy, train_steps
from ..validation import check_choice, check_int, check_matrix, check_positive, check_rng


class ReverseTask(NamedTuple):
    X: np.ndarray  # source strings (N, length), digits 0..vocab-1
    Y: np.ndarray  # target strings: each row of X reversed


def make_reverse_task(n: int, length: int, vocab: int = 10, rng=None, exclude=None) -> ReverseTask:
    """`n` random strings of `length` symbols 0..vocab-1 and their reversals, ``y_i = x_{m+1-i}``.

    `exclude` (an array (N', length)) lists strings that must not be drawn, e.g. the training strings when a
    held-out set is made; the strings drawn may repeat each other."""
    X = random_strings(n, length, vocab, rng, exclude)
    return ReverseTask(X, X[:, ::-1].copy())


class Attention(NamedTuple):
    weights: torch.Tensor | np.ndarray  # a_ij over the encoder positions j, (..., m); each row sums to 1
    context: torch.Tensor | np.ndarray  # c_i = sum_j a_ij zeta_j, (..., hidden)


def attention_context(scores, states) -> Attention:
    """Attention weights and contexts from scores, in NumPy: ``a_ij = exp(e_ij) / sum_k exp(e_ik)`` (a
    softmax over the encoder positions j, for each decoder step i) and ``c_i = sum_j a_ij zeta_j``.
    scores (n, m) = e_ij, states (m, h) = zeta_j; returns weights (n, m) and contexts (n, h)."""
    scores = check_matrix(scores, "scores")
    states = check_matrix(states, "states", scores.shape[1])
    weights = softmax(scores, axis=1)
    return Attention(weights, weights @ states)


class Decoded(NamedTuple):
    tokens: torch.Tensor  # the greedy output (batch, n)
    attention: torch.Tensor | None  # a_ij (batch, n, m), or None without attention


class Seq2Seq(nn.Module):
    """A GRU encoder–decoder for token sequences, ``p(y_{1:n} | x_{1:m}) = prod_i p(y_i | y_{<i}, x_{1:m})``.

    Encoder: ``zeta_j = GRU(zeta_{j-1}, E x_j)``, j = 1..m. Decoder: ``z_0 = zeta_m``, ``z_i = GRU(z_{i-1},
    [E' y_{i-1}, c_i])`` with y_0 the start symbol (token id `vocab`), and ``p(y_i | y_{<i}, x) =
    softmax(W [z_i, c_i] + b)``. With ``attention=True`` the context is additive (Bahdanau) attention,
    ``a_ij = softmax_j v^T tanh(W_z z_{i-1} + W_zeta zeta_j + b_a)`` (an MLP of [z_{i-1}, zeta_j]),
    ``c_i = sum_j a_ij zeta_j``; without attention there is no c_i and the decoder sees x only through
    z_0 = zeta_m (the bottleneck). Section 5.5."""

    def __init__(self, vocab: int, hidden: int, attention: bool = False, embed: int = 16):
        super().__init__()
        self.vocab, self.hidden = check_int(vocab, "vocab", 2), check_int(hidden, "hidden", 1)
        self.attention = check_choice(attention, "attention", (False, True))
        embed = check_int(embed, "embed", 1)
        self.source_embedding = nn.Embedding(vocab, embed)
        self.target_embedding = nn.Embedding(vocab + 1, embed)  # + the start symbol, id `vocab`
        self.encoder = nn.GRU(embed, hidden, batch_first=True)
        self.decoder = nn.GRU(embed + (hidden if attention else 0), hidden, batch_first=True)
        if attention:
            self.W_z = nn.Linear(hidden, hidden, bias=False)
            self.W_zeta = nn.Linear(hidden, hidden)  # its bias is b_a
            self.v = nn.Linear(hidden, 1, bias=False)
        self.output = nn.Linear(2 * hidden if attention else hidden, vocab)

    def encode(self, x) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder states zeta_1..zeta_m (batch, m, hidden) and the last one, zeta_m (batch, hidden)."""
        x = check_tokens(x, "x", self.vocab).to(self.output.weight.device)
        states, last = self.encoder(self.source_embedding(x))
        return states, last[0]

    def attend(self, z, states) -> Attention:
        """Additive attention of decoder state(s) z_{i-1} (batch, hidden) on the encoder states (batch, m,
        hidden): the weights a_ij = softmax_j e_ij, e_ij = v^T tanh(W_z z_{i-1} + W_zeta zeta_j + b_a), and the
        context c_i = sum_j a_ij zeta_j."""
        if not self.attention:
            raise ValueError("this model has no attention: build it with Seq2Seq(..., attention=True)")
        if states.ndim != 3 or z.shape != (len(states), self.hidden) or states.shape[2] != self.hidden:
            raise ValueError(
                f"z must be (batch, {self.hidden}) and states (batch, m, {self.hidden}), got "
                f"{tuple(z.shape)} and {tuple(states.shape)}"
            )
        scores = self.v(torch.tanh(self.W_z(z)[:, None] + self.W_zeta(states)))[..., 0]  # e_ij, (batch, m)
        weights = torch.softmax(scores, dim=1)  # over the encoder positions j
        return Attention(weights, torch.einsum("bj,bjh->bh", weights, states))

    def _step(self, y_prev, z, states) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """One decoder step: (y_{i-1}, z_{i-1}) -> (logits of y_i, z_i, a_i)."""
        inputs, weights = self.target_embedding(y_prev), None
        if self.attention:
            weights, context = self.attend(z, states)
            inputs = torch.cat([inputs, context], dim=1)
        _, z = self.decoder(inputs[:, None], z[None].contiguous())
        z = z[0]
        return self.output(torch.cat([z, context], dim=1) if self.attention else z), z, weights

    def forward(self, x, y) -> torch.Tensor:
        """Teacher forcing: the logits (batch, n, vocab) of p(y_i | y_{<i}, x) for i = 1..n, the decoder being
        fed the true previous symbols y_0 (start), y_1, ..., y_{n-1}."""
        y = check_tokens(y, "y", self.vocab).to(self.output.weight.device)
        states, z = self.encode(x)
        if len(y) != len(states):
            raise ValueError(f"x and y must hold the same number of strings, got {len(states)} and {len(y)}")
        y_prev = torch.cat([torch.full_like(y[:, :1], self.vocab), y[:, :-1]], dim=1)
        if not self.attention:  # the inputs are all known: one call of the GRU over the n steps
            Z, _ = self.decoder(self.target_embedding(y_prev), z[None].contiguous())
            return self.output(Z)
        logits = []
        for i in range(y.shape[1]):
            step_logits, z, _ = self._step(y_prev[:, i], z, states)
            logits.append(step_logits)
        return torch.stack(logits, dim=1)

    def sequence_log_prob(self, x, y) -> torch.Tensor:
        """``log p(y_{1:n} | x) = sum_i log p(y_i | y_{<i}, x)`` for every string of the batch, (batch,)."""
        log_p = torch.log_softmax(self(x, y), dim=-1)
        y = check_tokens(y, "y", self.vocab).to(log_p.device)
        return log_p.gather(2, y[..., None])[..., 0].sum(dim=1)

    @torch.no_grad()
    def greedy_decode(self, x, n: int) -> Decoded:
        """Greedy decoding of `n` symbols: ``y_i = argmax p(y_i | y_{<i}, x)``, each fed back as the next input.
        Returns the tokens (batch, n) and, with attention, the weights a_ij (batch, n, m)."""
        n = check_int(n, "n", 1)
        states, z = self.encode(x)
        y_prev = torch.full((len(states),), self.vocab, dtype=torch.long, device=states.device)
        tokens, weights = [], []
        for _ in range(n):
            logits, z, a = self._step(y_prev, z, states)
            y_prev = logits.argmax(dim=1)
            tokens.append(y_prev)
            weights.append(a)
        return Decoded(torch.stack(tokens, dim=1), torch.stack(weights, dim=1) if self.attention else None)


def train_seq2seq(
    model: Seq2Seq,
    X,
    Y,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-2,
    clip_grad_norm: float | None = 1.0,
    rng=None,
    progress: bool = True,
) -> np.ndarray:
    """Train with teacher forcing for a fixed number of `steps` by `training.train_steps`: each step draws
    `batch_size` pairs of rows of (X, Y) at random, minimises the cross-entropy
    ``-(1/n) sum_i log p(y_i | y_{<i}, x)`` averaged over the batch with Adam, its learning rate decaying from
    `lr` to 0 on a cosine, gradients clipped to norm `clip_grad_norm` (None: not clipped). Works for any model
    ``model(x, y) -> logits (batch, n, model.vocab)`` (chapter 06's transformer too). Returns the loss of every
    step; the model is left in the mode it came in."""
    X, Y = check_tokens(X, "X", model.vocab), check_tokens(Y, "Y", model.vocab)
    if len(X) != len(Y):
        raise ValueError(f"X and Y must hold the same number of strings, got {len(X)} and {len(Y)}")
    steps, batch_size = check_int(steps, "steps", 1), check_int(batch_size, "batch_size", 1)
    lr, rng = check_positive(lr, "lr"), check_rng(rng)

    def pairs():  # a random batch of (x, y) pairs per step
        while True:
            rows = torch.as_tensor(rng.integers(len(X), size=batch_size))
            yield X[rows], Y[rows]

    def loss(model, batch):
        x, y = batch
        return F.cross_entropy(model(x, y).reshape(-1, model.vocab), y.reshape(-1))

    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    return train_steps(
        model,
        loss,
        optimizer,
        pairs(),
        steps,
        scheduler=schedule,
        clip_grad_norm=clip_grad_norm,
        progress=progress,
        desc="steps",
    )


class Seq2SeqScore(NamedTuple):
    token_accuracy: float  # fraction of output symbols right
    exact_match: float  # fraction of strings right in every symbol
    per_position: np.ndarray  # token accuracy at each output position i, (n,)
    prediction: np.ndarray  # the greedy output (N, n)
    attention: np.ndarray | None  # a_ij (N, n, m), or None


def evaluate_seq2seq(model: Seq2Seq, X, Y) -> Seq2SeqScore:
    """Greedy-decode every row of X (as many symbols as Y has columns), the model in eval mode, and compare with
    Y; the model is left in the mode it came in."""
    X, Y = check_tokens(X, "X", model.vocab), check_tokens(Y, "Y", model.vocab)
    if len(X) != len(Y):
        raise ValueError(f"X and Y must hold the same number of strings, got {len(X)} and {len(Y)}")
    was_training = model.training
    model.eval()
    tokens, attention = model.greedy_decode(X, Y.shape[1])
    model.train(was_training)
    prediction = to_numpy(tokens)
    right = prediction == to_numpy(Y)
    return Seq2SeqScore(
        float(right.mean()),
        float(right.all(axis=1).mean()),
        right.mean(axis=0),
        prediction,
        None if attention is None else to_numpy(attention),
    )
