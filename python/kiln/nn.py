"""kiln.nn: modules, the built-in layers and models, optimizers,
checkpoints, and train() (the loop `kiln train` runs) with a callback per
step.

    m = kiln.nn.model("mlp", seed=0)          # fc1, fc2, fc3 (784-256-256-10)
    opt = kiln.nn.SGD(m, lr=0.05, momentum=0.9)
    loss = kiln.cross_entropy(m(x), y); loss.backward(); opt.step(); opt.zero_grad()

    r = kiln.nn.train(model="mlp", mode="lazy", epochs=1,
                      callback=lambda step, epoch, loss: print(step, loss))"""

import ctypes
import os
import sys

from . import _lib
from ._lib import lib, check, ptr
from .tensor import Tensor


class _Gen:
    """A kiln_generator (seeded), or the default one (None)."""

    def __init__(self, seed):
        self.h = lib.kiln_generator_new(int(seed)) if seed is not None else None

    def __del__(self):
        if self.h and lib is not None:
            lib.kiln_generator_free(self.h)


class Module:
    """A kiln_nn_module: named parameters and the layers built on them.
    Parameter names follow PyTorch's state_dict ("fc.weight")."""

    def __init__(self, seed=None, _handle=False):
        # _handle: a kiln_nn_module* to own (None: a call that failed)
        self._h = ptr(_handle if _handle is not False else lib.kiln_nn_module_new())
        self._gen = _Gen(seed)
        self._optims = []

    def __del__(self):
        if getattr(self, "_h", None) and lib is not None:
            lib.kiln_nn_module_free(self._h)
        self._h = None

    def __call__(self, x):
        """The model's forward (built-in models only)."""
        return Tensor(lib.kiln_nn_module_forward(self._h, x._h))

    def add_parameter(self, name, t):
        """Adds t (floating) as parameter name; it then requires grad."""
        check(lib.kiln_nn_module_add_param(self._h, name.encode(), t._h))
        return t

    def named_parameters(self):
        """[(name, Tensor)] in the order they were added."""
        out = []
        for i in range(lib.kiln_nn_module_n_params(self._h)):
            name = lib.kiln_nn_module_param_name(self._h, i).decode()
            out.append((name, Tensor(lib.kiln_retain(lib.kiln_nn_module_param(self._h, i)))))
        return out

    def parameters(self):
        return [t for _, t in self.named_parameters()]

    def state_dict(self):
        return dict(self.named_parameters())

    def numel(self):
        return lib.kiln_nn_module_numel(self._h)

    @property
    def arch(self):
        a = lib.kiln_nn_module_arch(self._h)
        return a.decode() if a else None

    def to_lazy(self):
        """Moves every parameter (and the state of optimizers made on this
        module) to the lazy device."""
        check(lib.kiln_nn_module_to_lazy(self._h))
        for o in self._optims:
            check(lib.kiln_optim_to_lazy(o._h))
        return self

    def train(self, mode=True):
        lib.kiln_nn_module_set_training(self._h, bool(mode))
        return self

    def eval(self):
        return self.train(False)

    @property
    def training(self):
        return lib.kiln_nn_module_is_training(self._h)

    # layers: each adds its parameters under "<name>.<param>"
    def linear(self, name, in_features, out_features, bias=True):
        """nn.Linear: x @ weight.T + bias."""
        return Layer(self, lib.kiln_nn_linear_new(self._h, name.encode(), in_features,
                                                  out_features, bias, self._gen.h))

    def conv2d(self, name, in_channels, out_channels, kernel_size, stride=1, padding=0):
        return Layer(self, lib.kiln_nn_conv2d_new(self._h, name.encode(), in_channels,
                                                  out_channels, kernel_size, stride, padding,
                                                  self._gen.h))

    def embedding(self, name, num_embeddings, dim):
        return Layer(self, lib.kiln_nn_embedding_new(self._h, name.encode(), num_embeddings, dim,
                                                     self._gen.h))

    def layer_norm(self, name, dim, eps=1e-5):
        return Layer(self, lib.kiln_nn_layer_norm_new(self._h, name.encode(), dim, float(eps)))

    def dropout(self, name, p=0.5):
        return Layer(self, lib.kiln_nn_dropout_new(self._h, name.encode(), float(p), self._gen.h))

    def lstm(self, name, input_size, hidden_size):
        """One-layer batch-first LSTM; calling it gives the last hidden state."""
        return Layer(self, lib.kiln_nn_lstm_new(self._h, name.encode(), input_size, hidden_size,
                                                self._gen.h))

    # checkpoints
    def save(self, path, optimizer=None, epoch=0):
        """Writes a kiln checkpoint (safetensors) of the parameters and,
        when given, the optimizer's state."""
        info = _CheckpointInfo()
        info.model = (self.arch or "").encode()[:15]
        if optimizer is not None:
            info.optimizer = lib.kiln_optim_name(optimizer._h)[:15]
            info.lr = optimizer.lr
            info.step = lib.kiln_optim_steps(optimizer._h)
        info.epoch = epoch
        check(lib.kiln_checkpoint_save(os.fsencode(path), self._h,
                                       optimizer._h if optimizer else None, ctypes.byref(info)))

    def load(self, path, optimizer=None):
        """Loads a checkpoint into this module (and optimizer); everything
        is checked before anything changes."""
        info = _CheckpointInfo()
        check(lib.kiln_checkpoint_load(os.fsencode(path), self._h,
                                       optimizer._h if optimizer else None, ctypes.byref(info)))
        return {"model": info.model.decode(), "optimizer": info.optimizer.decode(),
                "lr": info.lr, "step": info.step, "epoch": info.epoch, "plain": info.plain}


class _CheckpointInfo(ctypes.Structure):
    _fields_ = [("model", ctypes.c_char * 16), ("optimizer", ctypes.c_char * 16),
                ("lr", ctypes.c_double), ("step", ctypes.c_int64), ("epoch", ctypes.c_int64),
                ("batch", ctypes.c_int64), ("rng", ctypes.c_uint64 * 4), ("plain", ctypes.c_bool)]


lib.kiln_optim_name.restype = ctypes.c_char_p
lib.kiln_optim_name.argtypes = [ctypes.c_void_p]
lib.kiln_checkpoint_save.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.POINTER(_CheckpointInfo)]
lib.kiln_checkpoint_load.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.POINTER(_CheckpointInfo)]


class Layer:
    """A layer owned by its Module; call it on a tensor."""

    def __init__(self, module, handle):
        self._m = module  # the module owns the layer: keep it alive
        self._h = ptr(handle)

    def __call__(self, x):
        return Tensor(lib.kiln_nn_forward(self._h, x._h))


def model(arch="mlp", seed=0):
    """A built-in model, initialised as PyTorch would from a seeded
    generator: "mlp" (fc1, fc2, fc3: 784-256-256-10), "cnn", "lstm"; the
    input is images [B, 1, 28, 28] float32, the output logits [B, 10]."""
    g = _Gen(seed)
    m = Module(_handle=lib.kiln_nn_model_new(arch.encode(), g.h))
    m._gen = g
    return m


class Optimizer:
    """Updates a module's parameters from their .grad (under no_grad, so
    on a lazy module the update is recorded into the step's graph)."""

    _kind = 0

    def __init__(self, module, lr, **kw):
        o = _lib.OptimOpts()
        o.kind = self._kind
        o.lr = float(lr)
        for k, v in kw.items():
            if k == "betas":
                o.beta1, o.beta2 = v
            else:
                setattr(o, k, v)
        self._module = module
        self._h = ptr(lib.kiln_optim_new(module._h, ctypes.byref(o)))
        module._optims.append(self)

    def __del__(self):
        if getattr(self, "_h", None) and lib is not None:
            lib.kiln_optim_free(self._h)
        self._h = None

    def step(self):
        check(lib.kiln_optim_step(self._h))

    def zero_grad(self):
        """Sets every parameter's .grad to None."""
        check(lib.kiln_optim_zero_grad(self._h))

    @property
    def lr(self):
        return lib.kiln_optim_lr(self._h)

    @lr.setter
    def lr(self, value):
        lib.kiln_optim_set_lr(self._h, float(value))

    @property
    def steps(self):
        return lib.kiln_optim_steps(self._h)


class SGD(Optimizer):
    """torch.optim.SGD(lr, momentum, nesterov, weight_decay)."""

    _kind = 0

    def __init__(self, module, lr, momentum=0.0, nesterov=False, weight_decay=0.0):
        super().__init__(module, lr, momentum=momentum, nesterov=nesterov,
                         weight_decay=weight_decay)


class Adam(Optimizer):
    """torch.optim.Adam(lr, betas, eps, weight_decay)."""

    _kind = 1

    def __init__(self, module, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(module, lr, betas=betas, eps=eps, weight_decay=weight_decay)


class AdamW(Adam):
    _kind = 2

    def __init__(self, module, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(module, lr, betas=betas, eps=eps, weight_decay=weight_decay)


_MODES = {"eager": 0, "jit": 1, "lazy": 2}


def _libc_stdout():
    libc = ctypes.CDLL(None)
    return ctypes.c_void_p.in_dll(libc, "stdout").value, libc


def train(model="mlp", mode="eager", epochs=2, batch=64, lr=0.0, optimizer="sgd",
          momentum=0.9, schedule="cosine", seed=0, data=None, save=None, resume=None,
          plot=None, metrics=None, steps=0, sync="step", limit_train=0, limit_test=0,
          eval_batch=1000, verbose=True, progress=False, callback=None):
    """Runs kiln_nn_train, the loop `kiln train` runs, with the same
    options (see `kiln train --help`). callback(step, epoch, loss) is called
    after every step; returning True stops training. verbose prints the
    per-epoch lines to stdout. Returns a dict: losses (per step),
    test_loss and test_accuracy (per epoch), final_accuracy, final_loss,
    first_step, train_seconds, total_seconds, samples_per_sec."""
    o = _lib.TrainOpts()
    lib.kiln_nn_train_opts_default(ctypes.byref(o))
    if mode not in _MODES:
        raise ValueError("kiln.nn.train: mode must be eager, jit or lazy, not %r" % (mode,))
    keep = []

    def s(v):
        if v is None:
            return None
        b = os.fsencode(v)
        keep.append(b)
        return b

    o.model, o.mode, o.epochs, o.batch, o.lr = s(model), _MODES[mode], epochs, batch, lr
    o.optimizer, o.momentum, o.schedule, o.seed = s(optimizer), momentum, s(schedule), seed
    o.data_dir, o.save_path, o.resume_path = s(data), s(save), s(resume)
    o.plot_path, o.metrics_path, o.max_steps = s(plot), s(metrics), steps
    o.sync_phases = sync == "phases"
    o.train_limit, o.test_limit, o.eval_batch = limit_train, limit_test, eval_batch
    libc = None
    if verbose:
        sys.stdout.flush()
        o.out, libc = _libc_stdout()
    o.progress = bool(progress)
    raised = []

    def on_step(step, epoch, loss, _ud):
        try:
            return 1 if callback(step, epoch, loss) else 0
        except BaseException as e:  # stop training, re-raise below
            raised.append(e)
            return 1

    cb = _lib.STEP_FN(on_step) if callback else _lib.STEP_FN()
    o.on_step = cb
    r = _lib.TrainResult()
    status = lib.kiln_nn_train(ctypes.byref(o), ctypes.byref(r))
    if libc is not None:
        libc.fflush(None)
    try:
        if raised:
            raise raised[0]
        check(status)
        return {
            "losses": [r.losses[i] for i in range(r.n_steps)],
            "first_step": r.first_step,
            "test_loss": [r.test_loss[i] for i in range(r.n_epochs)],
            "test_accuracy": [r.test_accuracy[i] for i in range(r.n_epochs)],
            "final_accuracy": r.final_accuracy, "final_loss": r.final_loss,
            "train_seconds": r.train_seconds, "total_seconds": r.total_seconds,
            "samples_per_sec": r.samples_per_sec,
        }
    finally:
        lib.kiln_nn_train_result_free(ctypes.byref(r))


def evaluate(checkpoint, data=None, limit=0):
    """Test loss and accuracy of a checkpoint (kiln eval)."""
    loss, acc = ctypes.c_double(), ctypes.c_double()
    check(lib.kiln_nn_eval_checkpoint(os.fsencode(checkpoint), None if data is None else
                                      os.fsencode(data), limit, ctypes.byref(loss),
                                      ctypes.byref(acc)))
    return loss.value, acc.value
