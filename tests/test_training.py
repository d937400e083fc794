import numpy as np
import pytest
import torch

import dlnotes
from dlnotes import device, seed_each_cell, seed_everything, setup_notebook, use_threads
from dlnotes.training import (
    accuracy,
    count_parameters,
    evaluate,
    fit,
    make_loader,
    progress_bar,
    to_numpy,
    train_steps,
)

from conftest import bad_input_test


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


def test_setup_notebook_refuses_another_version_and_explains_widgets_off_the_website(monkeypatch, capsys):
    monkeypatch.setenv("DLNOTES_SEED", "2")
    monkeypatch.delenv("DLNOTES_WIDGET_FRAMES", raising=False)
    threads = torch.get_num_threads()
    try:
        assert setup_notebook(dlnotes.__version__) == 2
        assert "model not found" in capsys.readouterr().out
        monkeypatch.setenv("DLNOTES_WIDGET_FRAMES", "1")  # the website's build
        setup_notebook(dlnotes.__version__)
        assert capsys.readouterr().out == ""
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


def _reference_loop(model, X, y, steps, lr, clip, flip_every):
    """The textbook loop written out by hand, to compare train_steps with."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    losses = []
    for step in range(steps):
        Xb = -X[step] if step % flip_every == 0 else X[step]
        loss = torch.nn.functional.cross_entropy(model(Xb), y[step])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return losses


def test_train_steps_is_the_textbook_loop_with_transform_clipping_and_schedule():
    gen = torch.Generator().manual_seed(0)
    X, y = torch.randn(8, 16, 3, generator=gen), torch.randint(0, 2, (8, 16), generator=gen)
    models = [
        torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)) for _ in "ab"
    ]
    models[1].load_state_dict(models[0].state_dict())
    expected = _reference_loop(models[0], X, y, steps=6, lr=0.5, clip=0.1, flip_every=2)
    optimizer = torch.optim.SGD(models[1].parameters(), lr=0.5, momentum=0.9)
    counter = iter(range(100))

    def flip_every_other(model, batch):  # a per-batch transform that sees the model in eval mode
        assert not model.training
        return (-batch[0], batch[1]) if next(counter) % 2 == 0 else batch

    losses = train_steps(
        models[1],
        lambda model, batch: torch.nn.functional.cross_entropy(model(batch[0]), batch[1]),
        optimizer,
        zip(X, y, strict=True),  # a generator of batches: eight of them, only `steps` used
        steps=6,
        transform=flip_every_other,
        scheduler=torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5),
        clip_grad_norm=0.1,
        progress=False,
    )
    assert np.allclose(losses, expected, rtol=1e-6) and len(losses) == 6
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-7)


def test_train_steps_takes_a_loaders_batches_in_the_order_a_plain_loop_does():
    """Epoch after epoch: an extra iterator, or one not run to its end, would change the loader's next order."""
    X, y = np.zeros((50, 1)), np.arange(50)
    reference = make_loader(X, y, batch_size=8, rng=1)
    plain = [yb.tolist() for _ in range(3) for _, yb in reference]
    seen, model = [], torch.nn.Linear(1, 1)
    loader = make_loader(X, y, batch_size=8, rng=1)

    def loss(model, batch):
        seen.append(batch[1].tolist())
        return model(batch[0]).sum()

    for _ in range(3):
        train_steps(model, loss, torch.optim.SGD(model.parameters(), lr=0.0), loader, progress=False)
    assert seen == plain


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_training_and_evaluation_leave_the_model_in_the_mode_it_came_in(mode):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    model.train(mode == "train")
    loader = make_loader(np.zeros((4, 2)), np.zeros(4, dtype=int), batch_size=2)
    seen = []

    def loss(model, batch):
        seen.append(model.training)
        return model(batch[0]).sum()

    train_steps(model, loss, torch.optim.SGD(model.parameters(), lr=0.1), loader, progress=False)
    assert seen == [True, True] and model.training == (mode == "train")
    fit(
        model,
        torch.nn.functional.cross_entropy,
        torch.optim.SGD(model.parameters(), lr=0.1),
        loader,
        1,
        progress=False,
    )
    assert model.training == (mode == "train")
    evaluate(model, loader, {"accuracy": accuracy})
    assert model.training == (mode == "train")


def test_a_notebook_progress_bar_saves_its_finished_state_as_text(monkeypatch):
    """What a notebook keeps beside the widget (GitHub's preview, plain nbconvert) is the bar's last text."""
    import tqdm.auto
    from tqdm.notebook import tqdm as notebook_tqdm

    import dlnotes.training as training

    shown = []

    class Handle:
        def update(self, obj):
            shown.append(repr(obj))

    def display(obj, display_id=False):
        shown.append(repr(obj))
        return Handle()

    monkeypatch.setattr(training, "display", display)
    monkeypatch.setattr(training, "auto_tqdm", notebook_tqdm)
    for _ in progress_bar(range(300), desc="epochs"):
        pass
    assert len(shown) == 2 and "0/300" in shown[0] and "100%" in shown[1] and "300/300" in shown[1]
    assert tqdm.auto.tqdm is not notebook_tqdm, "the test ran outside a notebook"


BAD_INPUT = [
    (
        lambda: make_loader(np.zeros((5, 2)), np.zeros(4)),
        ValueError,
        "y must have one target per row of X (5)",
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
        lambda: fit(torch.nn.Linear(2, 2), torch.nn.functional.mse_loss, None, [], 1, clip_grad_norm=0),
        ValueError,
        "clip_grad_norm",
    ),
    (lambda: train_steps(torch.nn.Linear(2, 2), None, None, []), TypeError, "loss must be callable"),
    (
        lambda: train_steps(torch.nn.Linear(2, 2), lambda m, b: 0, None, iter([]), steps=0),
        ValueError,
        "steps",
    ),
    (
        lambda: train_steps(torch.nn.Linear(2, 2), lambda m, b: 0, None, [], transform="flip"),
        TypeError,
        "transform",
    ),
]
test_bad_input_gets_a_clear_error = bad_input_test(BAD_INPUT)


def test_seed_each_cell_makes_a_cell_draw_the_same_numbers_when_run_again():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        seed_each_cell(3)
        seed_each_cell(3)  # the setup cell run twice: one hook, not two
        assert sum("seed_each_cell" in c.__qualname__ for c in shell.events.callbacks["pre_run_cell"]) == 1
        shell.run_cell("import numpy as np, torch\nrng = np.random.default_rng(0)")
        draw = "drawn = (rng.normal(), np.random.rand(), torch.rand(1).item())"
        first = shell.run_cell(draw) and shell.user_ns["drawn"]
        shell.run_cell("rng.normal(size=100); torch.rand(100)")  # the generators move on in another cell
        assert shell.run_cell(draw) and shell.user_ns["drawn"] == first
        shell.run_cell(draw + "  # another text")
        assert all(a != b for a, b in zip(shell.user_ns["drawn"], first, strict=True))
        seed_each_cell(4)
        shell.run_cell(draw)
        assert all(a != b for a, b in zip(shell.user_ns["drawn"], first, strict=True))
    finally:
        InteractiveShell.clear_instance()
    seed_each_cell(0)  # outside IPython: nothing to do
    with pytest.raises(ValueError, match="seed must be"):
        seed_each_cell(-1)
