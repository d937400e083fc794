import numpy as np
import pytest
import torch

from dlnotes import device, seed_everything
from dlnotes.training import accuracy, evaluate, fit, make_loader


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
    with pytest.raises(ValueError, match="seed"):
        seed_everything(seed)


def test_seed_everything_rejects_bad_environment(monkeypatch):
    monkeypatch.setenv("DLNOTES_SEED", "one")
    with pytest.raises(ValueError, match="DLNOTES_SEED"):
        seed_everything()


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


def test_make_loader_rejects_mismatched_lengths_and_batch_size():
    with pytest.raises(ValueError, match="X must have shape"):
        make_loader(np.zeros((5, 2), np.float32), np.zeros(4, np.int64))
    with pytest.raises(ValueError, match="batch_size"):
        make_loader(np.zeros((5, 2), np.float32), np.zeros(5, np.int64), batch_size=0)


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
        progress=False,
    )
    assert len(history["train_loss"]) == len(history["val_accuracy"]) == 20
    assert history["train_loss"][-1] < 0.5 * history["train_loss"][0]
    result = evaluate(model, make_loader(X, y, shuffle=False), torch.nn.functional.cross_entropy)
    assert result["accuracy"] >= 0.97
    assert result["accuracy"] == history["val_accuracy"][-1]
    assert np.isclose(result["loss"], torch.nn.functional.cross_entropy(model(X), y).item(), rtol=1e-5)


def test_fit_rejects_bad_epochs():
    model = torch.nn.Linear(2, 2)
    loader = make_loader(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="epochs"):
        fit(
            model,
            torch.nn.functional.cross_entropy,
            torch.optim.SGD(model.parameters(), lr=0.1),
            loader,
            epochs=0,
        )


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
