import numpy as np
import pytest
import torch

import dlnotes
from dlnotes import device, seed_everything, setup_notebook, use_threads
from dlnotes.training import accuracy, count_parameters, evaluate, fit, make_loader, to_numpy


def test_seed_everything_reads_the_environment(monkeypatch):
    monkeypatch.setenv("DLNOTES_SEED", "7")
    assert seed_everything() == 7
    monkeypatch.delenv("DLNOTES_SEED")
    assert seed_everything() == 0


def test_seed_everything_makes_runs_repeat():
    draws = []
    for _ in range(2):
        seed_everything(3)
        draws.append((np.random.rand(), torch.rand(1).item()))  # noqa: NPY002 - the legacy state is seeded too
    assert draws[0] == draws[1]
    seed_everything(4)
    assert (np.random.rand(), torch.rand(1).item()) != draws[0]  # noqa: NPY002


@pytest.mark.parametrize("seed", [-1, 1.5, "3", True])
def test_seed_everything_rejects_bad_seeds(seed):
    with pytest.raises((TypeError, ValueError), match="seed must be an int"):
        seed_everything(seed)


def test_seed_everything_rejects_bad_environment(monkeypatch):
    monkeypatch.setenv("DLNOTES_SEED", "one")
    with pytest.raises(ValueError, match="DLNOTES_SEED"):
        seed_everything()


def test_use_threads_sets_torch_and_blas_threads(monkeypatch):
    import threadpoolctl

    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("DLNOTES_THREADS", raising=False)
        assert use_threads() == 1 and torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpoolctl.threadpool_info())
        monkeypatch.setenv("DLNOTES_THREADS", "2")
        assert use_threads() == 2 and torch.get_num_threads() == 2
        monkeypatch.setenv("DLNOTES_THREADS", "0")
        with pytest.raises(ValueError, match="DLNOTES_THREADS"):
            use_threads()
        with pytest.raises(ValueError, match="n must be an int"):
            use_threads(0)
    finally:
        use_threads(before)


def test_setup_notebook_refuses_another_version_of_dlnotes(monkeypatch):
    monkeypatch.setenv("DLNOTES_SEED", "2")
    threads = torch.get_num_threads()
    try:
        assert setup_notebook(dlnotes.__version__) == 2
    finally:
        use_threads(threads)
    with pytest.raises(RuntimeError, match=r"written for dlnotes 0\.0\.1, but dlnotes .* is installed"):
        setup_notebook("0.0.1")


def test_device_is_a_torch_device():
    dev = device()
    assert isinstance(dev, torch.device)
    assert dev.type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_accuracy_counts_argmax_hits():
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [5.0, -1.0], [0.0, 0.1]])
    assert accuracy(logits, torch.tensor([0, 1, 1, 0])) == 0.5


def test_accuracy_rejects_bad_shapes():
    with pytest.raises(ValueError, match="logits"):
        accuracy(torch.zeros(4), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="y"):
        accuracy(torch.zeros(4, 2), torch.zeros(3, dtype=torch.long))


def test_make_loader_converts_floats_keeps_labels_and_shapes():
    X = np.random.default_rng(0).normal(size=(10, 3, 4))  # float64, as load_digits_split returns
    loader = make_loader(X, np.arange(10), batch_size=4, shuffle=False)
    Xb, yb = next(iter(loader))
    assert Xb.dtype == torch.float32 and yb.dtype == torch.int64 and Xb.shape == (4, 3, 4)
    sequences = make_loader(
        X, X[:, :, ::-1].copy(), batch_size=5, dtype=torch.float64
    )  # targets of any shape
    assert all(yb.shape == (5, 3, 4) and yb.dtype == torch.float64 for _, yb in sequences)
    (only_inputs,) = next(iter(make_loader(X, batch_size=10)))  # no targets
    assert only_inputs.shape == (10, 3, 4)


def test_make_loader_drops_the_incomplete_last_batch_only_when_asked():
    X = np.zeros((10, 2))
    assert [len(x) for (x,) in make_loader(X, batch_size=4, shuffle=False)] == [4, 4, 2]
    assert [len(x) for (x,) in make_loader(X, batch_size=4, shuffle=False, drop_last=True)] == [4, 4]


def test_make_loader_shuffles_with_rng():
    orders = [
        torch.cat([y for _, y in make_loader(np.zeros((50, 1)), np.arange(50), rng=seed)])
        for seed in (1, 1, 2)
    ]
    assert torch.equal(orders[0], orders[1]) and not torch.equal(orders[0], orders[2])


def test_training_helpers_work_with_the_digits_split_and_an_mlp():
    from dlnotes.data import load_digits_split
    from dlnotes.feedforward import MLP

    split = load_digits_split(rng=0)
    torch.manual_seed(0)  # the initial weights, not whatever state earlier tests left behind
    model = MLP([64, 32, 10])
    loader = make_loader(split.X_train, split.y_train, rng=0)
    fit(
        model,
        torch.nn.functional.cross_entropy,
        torch.optim.Adam(model.parameters(), lr=3e-3),
        loader,
        3,
        progress=False,
    )
    assert evaluate(model, make_loader(split.X_test, split.y_test), {"accuracy": accuracy})["accuracy"] > 0.5


def test_count_parameters_and_to_numpy():
    assert count_parameters(torch.nn.Linear(5, 3)) == 3 * (5 + 1)
    frozen = torch.nn.Linear(5, 3)
    frozen.bias.requires_grad_(False)
    assert count_parameters(frozen) == 15
    t = torch.ones(2, requires_grad=True) * 2
    assert isinstance(to_numpy(t), np.ndarray) and to_numpy(t).tolist() == [2.0, 2.0]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: make_loader(np.zeros((5, 2)), np.zeros(4)),
            ValueError,
            r"y must have one target per row of X \(5\)",
        ),
        (lambda: make_loader(np.zeros((5, 2)), np.zeros(5), batch_size=0), ValueError, "batch_size"),
        (lambda: make_loader(np.zeros(()), None), ValueError, "X must have shape"),
        (lambda: make_loader(np.zeros((0, 2))), ValueError, "X must have shape"),
        (lambda: make_loader(np.zeros((3, 2)), np.array([True, False, True])), TypeError, "y must hold"),
        (lambda: make_loader(np.zeros((3, 2)), rng="seed"), TypeError, "rng"),
        (lambda: accuracy(torch.zeros(4), torch.zeros(4, dtype=torch.long)), ValueError, "logits"),
        (lambda: accuracy(torch.zeros(4, 2), torch.zeros(3, dtype=torch.long)), ValueError, "y"),
        (lambda: evaluate(torch.nn.Linear(2, 2), [], {"accuracy": accuracy}), ValueError, "empty loader"),
        (lambda: evaluate(torch.nn.Linear(2, 2), [(torch.zeros(1, 2),)], {}), ValueError, "metrics"),
        (
            lambda: fit(torch.nn.Linear(2, 2), torch.nn.functional.mse_loss, None, [], 1),
            ValueError,
            "empty loader",
        ),
        (lambda: fit(torch.nn.Linear(2, 2), None, None, [], 0), ValueError, "epochs"),
        (
            lambda: fit(torch.nn.Linear(2, 2), None, None, [], 1, clip_grad_norm=0),
            ValueError,
            "clip_grad_norm",
        ),
    ],
)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_fit_trains_a_linear_classifier_on_separable_data():
    seed_everything(0)
    X = torch.randn(400, 2)
    y = (X[:, 0] + 2 * X[:, 1] > 0).long()
    model = torch.nn.Linear(2, 2)
    loader = make_loader(X, y, batch_size=32)
    history = fit(
        model,
        torch.nn.functional.cross_entropy,
        torch.optim.SGD(model.parameters(), lr=0.5),
        loader,
        epochs=20,
        val_loader=make_loader(X, y, shuffle=False),
        metrics={"accuracy": accuracy},
        progress=False,
    )
    assert len(history["train_loss"]) == len(history["val_accuracy"]) == len(history["val_loss"]) == 20
    assert history["train_loss"][-1] < 0.5 * history["train_loss"][0]
    metrics = {"accuracy": accuracy, "loss": torch.nn.functional.cross_entropy}
    result = evaluate(model, make_loader(X, y, shuffle=False), metrics)
    assert result["accuracy"] >= 0.97
    assert result["accuracy"] == history["val_accuracy"][-1] and result["loss"] == history["val_loss"][-1]
    assert np.isclose(result["loss"], torch.nn.functional.cross_entropy(model(X), y).item(), rtol=1e-5)


def test_fit_trains_an_autoencoder_on_data_without_targets():
    seed_everything(0)
    Z = torch.randn(256, 2)
    X = Z @ torch.randn(2, 6)  # rank-2 data: a linear autoencoder with a 2-unit code can reconstruct it
    model = torch.nn.Sequential(torch.nn.Linear(6, 2), torch.nn.Linear(2, 6))
    history = fit(
        model,
        torch.nn.functional.mse_loss,
        torch.optim.Adam(model.parameters(), lr=0.01),
        make_loader(X, batch_size=32),
        epochs=40,
        progress=False,
    )
    assert history["train_loss"][-1] < 0.01 * history["train_loss"][0]


def test_fit_clips_the_gradient_norm():
    model = torch.nn.Linear(2, 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    X, y = torch.tensor([[100.0, 0.0]]), torch.tensor([[1.0]])  # a huge gradient, 2 * 100 * 1 = 200
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    fit(
        model,
        torch.nn.functional.mse_loss,
        optimizer,
        make_loader(X, y),
        1,
        clip_grad_norm=0.5,
        progress=False,
    )
    assert torch.allclose(model.weight.norm(), torch.tensor(0.5))  # one SGD step of norm lr * 0.5


def test_fit_steps_the_learning_rate_schedule_once_per_batch():
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (1 + step))
    loader = make_loader(torch.randn(10, 2), torch.zeros(10, dtype=torch.long), batch_size=4)  # 3 batches
    fit(
        model,
        torch.nn.functional.cross_entropy,
        optimizer,
        loader,
        epochs=2,
        scheduler=schedule,
        progress=False,
    )
    assert np.isclose(optimizer.param_groups[0]["lr"], 1 / 7)


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a GPU (Colab's GPU runtime is a reader's path)"
)
def test_models_on_a_gpu_leave_torch_through_the_cpu():
    from dlnotes.cnn import receptive_field_mask
    from dlnotes.rnn import LSTMCell

    lstm = torch.nn.LSTM(3, 4).cuda()
    assert LSTMCell(3, 4).load_torch(lstm).F.shape == (4, 7)
    stack = torch.nn.Sequential(torch.nn.Conv1d(1, 1, 3), torch.nn.Conv1d(1, 1, 3)).cuda()
    assert receptive_field_mask(stack, (1, 20)).sum() == 5
    assert to_numpy(torch.ones(2, device="cuda")).tolist() == [1.0, 1.0]
