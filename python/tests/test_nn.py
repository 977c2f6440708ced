"""kiln.nn: built-in models and layers, optimizers against hand-computed
updates, checkpoints round-trip, and train() (kiln_nn_train, the CLI's
loop) with a per-step callback that sees every step and can stop it."""
import os

import numpy as np
import pytest

import kiln

DATA = "/usr/share/datasets/fashion-mnist"
have_data = os.path.isdir(DATA)


def test_mlp_model_parameters_and_forward():
    m = kiln.nn.model("mlp", seed=0)
    names = [n for n, _ in m.named_parameters()]
    assert names[:2] == ["fc1.weight", "fc1.bias"] and len(names) == 6
    assert m.numel() == 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10
    w = m.state_dict()["fc1.weight"].numpy()
    bound = 1 / np.sqrt(784)  # nn.Linear's U(-1/sqrt(in), 1/sqrt(in))
    assert w.shape == (256, 784) and np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    out = m(kiln.zeros(5, 1, 28, 28))
    assert out.shape == (5, 10)
    assert np.array_equal(kiln.nn.model("mlp", seed=0).state_dict()["fc3.bias"].numpy(),
                          m.state_dict()["fc3.bias"].numpy())  # seeded


def test_layers_on_a_hand_built_module():
    m = kiln.nn.Module(seed=1)
    fc = m.linear("fc", 3, 2)
    ln = m.layer_norm("ln", 2)
    x = kiln.tensor([[1.0, 2.0, 3.0]])
    y = fc(x)
    w, b = m.state_dict()["fc.weight"].numpy(), m.state_dict()["fc.bias"].numpy()
    np.testing.assert_allclose(y.numpy(), x.numpy() @ w.T + b, rtol=1e-6)
    z = ln(y).numpy()
    np.testing.assert_allclose(z.mean(), 0, atol=1e-6)
    np.testing.assert_allclose(np.abs(z), 1, rtol=1e-4)  # two values: +-1
    with pytest.raises(kiln.KilnError):
        m.linear("fc", 3, 2)  # duplicate name


def test_sgd_momentum_matches_hand_computed():
    m = kiln.nn.Module()
    p = m.add_parameter("p", kiln.tensor([1.0, -2.0]))
    opt = kiln.nn.SGD(m, lr=0.1, momentum=0.9)
    v = np.zeros(2)
    q = np.array([1.0, -2.0])
    for _ in range(3):
        loss = (p * p).sum()       # grad 2p
        loss.backward()
        opt.step()
        opt.zero_grad()
        g = 2 * q
        v = 0.9 * v + g if _ else g
        q = q - 0.1 * v
        np.testing.assert_allclose(p.numpy(), q, rtol=1e-6)
    assert opt.steps == 3 and opt.lr == pytest.approx(0.1)
    assert p.grad is None


def test_adam_first_step_is_lr_times_sign():
    m = kiln.nn.Module()
    p = m.add_parameter("p", kiln.tensor([1.0, -2.0, 3.0]))
    opt = kiln.nn.Adam(m, lr=0.01)
    (p * kiln.tensor([1.0, 2.0, -4.0])).sum().backward()
    opt.step()
    np.testing.assert_allclose(p.numpy(), [1 - 0.01, -2 - 0.01, 3 + 0.01], rtol=1e-5)


def test_checkpoint_round_trip(tmp_path):
    m = kiln.nn.model("mlp", seed=3)
    opt = kiln.nn.SGD(m, lr=0.05, momentum=0.9)
    path = str(tmp_path / "c.safetensors")
    m.save(path, opt, epoch=1)
    m2 = kiln.nn.model("mlp", seed=4)
    info = m2.load(path)
    assert info["model"] == "mlp" and info["epoch"] == 1
    np.testing.assert_array_equal(m2.state_dict()["fc2.weight"].numpy(),
                                  m.state_dict()["fc2.weight"].numpy())
    with pytest.raises(kiln.KilnIOError):
        m2.load(str(tmp_path / "missing.safetensors"))


@pytest.mark.skipif(not have_data, reason="needs Debian's dataset-fashion-mnist")
def test_train_with_a_callback_per_step(tmp_path):
    seen = []

    def cb(step, epoch, loss):
        seen.append((step, epoch, loss))
        return step == 4  # stop after step 4

    r = kiln.nn.train(model="mlp", mode="lazy", epochs=1, limit_train=640, limit_test=200,
                      verbose=False, callback=cb, save=str(tmp_path / "m.safetensors"))
    assert [s for s, _, _ in seen] == [1, 2, 3, 4] and all(e == 1 for _, e, _ in seen)
    assert [l for _, _, l in seen] == r["losses"]
    assert 2.0 < r["losses"][0] < 2.6  # about ln(10) at the start
    assert os.path.exists(tmp_path / "m.safetensors")
    loss, acc = kiln.nn.evaluate(str(tmp_path / "m.safetensors"), limit=200)
    assert 0 < acc <= 1 and loss > 0

    def boom(step, epoch, loss):
        raise KeyError("from the callback")

    with pytest.raises(KeyError):
        kiln.nn.train(epochs=1, limit_train=128, limit_test=64, verbose=False, callback=boom)
    with pytest.raises(kiln.KilnError, match="nosuch"):
        kiln.nn.train(model="nosuch", epochs=1, limit_train=64, verbose=False)
