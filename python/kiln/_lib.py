"""kiln._lib: loads libkiln.so with ctypes and declares the C functions the
package calls (argument and result types), the structs it shares with C,
and the error check that turns a failing call into a Python exception.

The library is looked up, in order: $KILN_LIBRARY; the copy bundled by
``pip install`` (kiln/libkiln.so.*); the directory ``make install`` wrote
into _libpath.py; the source tree's build/ (python/../build); then the
system's search path (libkiln.so.0). No compiler is needed at import."""

import ctypes
import glob
import os

_here = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("KILN_LIBRARY")
    if env:
        yield env
    for p in sorted(glob.glob(os.path.join(_here, "libkiln.so.*.*.*"))):
        yield p
    try:
        from . import _libpath  # written by make install
        yield os.path.join(_libpath.LIBDIR, "libkiln.so.0")
    except ImportError:
        pass
    yield os.path.join(_here, "..", "..", "build", "libkiln.so.0")
    yield "libkiln.so.0"


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("kiln: cannot load libkiln.so (set KILN_LIBRARY): " + "; ".join(errors))


lib, path = _load()

P = ctypes.c_void_p
I64 = ctypes.c_int64
I64P = ctypes.POINTER(ctypes.c_int64)
D = ctypes.c_double
INT = ctypes.c_int
B = ctypes.c_bool
S = ctypes.c_char_p


class Value(ctypes.Structure):
    """kiln_value: a kind and a union of tensor, int64, double, bool."""

    class _U(ctypes.Union):
        _fields_ = [("t", P), ("i", I64), ("f", D), ("b", B)]

    _anonymous_ = ("u",)
    _fields_ = [("kind", INT), ("u", _U)]


VALUE_NONE, VALUE_TENSOR, VALUE_INT, VALUE_FLOAT, VALUE_BOOL = range(5)


class BackwardOpts(ctypes.Structure):
    _fields_ = [("retain_graph", B), ("create_graph", B), ("inputs", ctypes.POINTER(P)),
                ("n_inputs", INT)]


class OptimOpts(ctypes.Structure):
    _fields_ = [("kind", INT), ("lr", D), ("momentum", D), ("nesterov", B),
                ("weight_decay", D), ("beta1", D), ("beta2", D), ("eps", D)]


STEP_FN = ctypes.CFUNCTYPE(INT, I64, INT, D, P)
RELEASE_FN = ctypes.CFUNCTYPE(None, P)


class TrainOpts(ctypes.Structure):
    """kiln_nn_train_opts (include/kiln.h): keep in the same order."""

    _fields_ = [("model", S), ("mode", INT), ("epochs", INT), ("batch", I64), ("lr", D),
                ("optimizer", S), ("momentum", D), ("schedule", S), ("seed", ctypes.c_uint64),
                ("data_dir", S), ("save_path", S), ("resume_path", S), ("plot_path", S),
                ("metrics_path", S), ("max_steps", I64), ("sync_phases", B),
                ("train_limit", I64), ("test_limit", I64), ("eval_batch", I64),
                ("out", P), ("progress", B), ("dist", B), ("bucket_mb", D),
                ("dist_timeout", D), ("no_sync_steps", I64), ("on_step", STEP_FN), ("on_step_ud", P),
                ("graph_path", S), ("weights_path", S), ("no_nan_check", B)]


class TrainResult(ctypes.Structure):
    _fields_ = [("n_steps", I64), ("first_step", I64), ("losses", ctypes.POINTER(D)),
                ("n_epochs", INT), ("test_loss", ctypes.POINTER(D)),
                ("test_accuracy", ctypes.POINTER(D)), ("final_accuracy", D), ("final_loss", D),
                ("train_seconds", D), ("total_seconds", D), ("samples_per_sec", D)]


class FunctionStats(ctypes.Structure):
    _fields_ = [("profiling_runs", I64), ("optimizations", I64), ("guard_passes", I64),
                ("guard_failures", I64), ("fallback_calls", I64), ("bailout_depth_reached", INT)]


# name: (result, argument types)
_SIGS = {
    "kiln_version": (S, []),
    "kiln_last_error": (S, []),
    "kiln_clear_error": (None, []),
    "kiln_last_status": (INT, []),
    "kiln_retain": (P, [P]),
    "kiln_release": (None, [P]),
    "kiln_free": (None, [P]),
    "kiln_tensor_ndim": (INT, [P]),
    "kiln_tensor_shape": (I64P, [P]),
    "kiln_tensor_strides": (I64P, [P]),
    "kiln_tensor_numel": (I64, [P]),
    "kiln_tensor_dtype": (INT, [P]),
    "kiln_tensor_data": (P, [P]),
    "kiln_tensor_is_contiguous": (B, [P]),
    "kiln_tensor_is_lazy": (B, [P]),
    "kiln_empty": (P, [INT, I64P, INT]),
    "kiln_zeros": (P, [INT, I64P, INT]),
    "kiln_ones": (P, [INT, I64P, INT]),
    "kiln_full": (P, [INT, I64P, D, INT]),
    "kiln_scalar": (P, [D, INT]),
    "kiln_arange": (P, [D, D, D, INT]),
    "kiln_from_data": (P, [P, INT, I64P, INT]),
    "kiln_from_blob": (P, [P, INT, I64P, I64P, INT, RELEASE_FN, P]),
    "kiln_rand": (P, [INT, I64P, INT, P]),
    "kiln_randn": (P, [INT, I64P, INT, P]),
    "kiln_manual_seed": (None, [ctypes.c_uint64]),
    "kiln_generator_new": (P, [ctypes.c_uint64]),
    "kiln_generator_free": (None, [P]),
    "kiln_item": (INT, [P, ctypes.POINTER(D)]),
    "kiln_copy_": (INT, [P, P]),
    "kiln_fill_": (INT, [P, D]),
    "kiln_add_": (INT, [P, P, D]),
    "kiln_mul_": (INT, [P, P]),
    "kiln_view": (P, [P, INT, I64P]),
    "kiln_reshape": (P, [P, INT, I64P]),
    "kiln_t": (P, [P]),
    "kiln_transpose": (P, [P, INT, INT]),
    "kiln_permute": (P, [P, INT, I64P]),
    "kiln_unsqueeze": (P, [P, INT]),
    "kiln_squeeze": (P, [P]),
    "kiln_squeeze_dim": (P, [P, INT]),
    "kiln_expand": (P, [P, INT, I64P]),
    "kiln_slice": (P, [P, INT, I64, I64, I64]),
    "kiln_select": (P, [P, INT, I64]),
    "kiln_contiguous": (P, [P]),
    "kiln_clone": (P, [P]),
    "kiln_to_dtype": (P, [P, INT]),
    "kiln_detach": (P, [P]),
    "kiln_leaky_relu": (P, [P, D]),
    "kiln_gelu": (P, [P, B]),
    "kiln_clamp": (P, [P, D, D]),
    "kiln_pow_scalar": (P, [P, D]),
    "kiln_where": (P, [P, P, P]),
    "kiln_sum": (P, [P, I64P, INT, B]),
    "kiln_mean": (P, [P, I64P, INT, B]),
    "kiln_amax": (P, [P, I64P, INT, B]),
    "kiln_amin": (P, [P, I64P, INT, B]),
    "kiln_var": (P, [P, I64P, INT, I64, B]),
    "kiln_argmax": (P, [P, INT, B, B]),
    "kiln_linear": (P, [P, P, P]),
    "kiln_addmm": (P, [P, P, P, D, D]),
    "kiln_softmax": (P, [P, INT]),
    "kiln_log_softmax": (P, [P, INT]),
    "kiln_cat": (P, [ctypes.POINTER(P), INT, INT]),
    "kiln_stack": (P, [ctypes.POINTER(P), INT, INT]),
    "kiln_index_select": (P, [P, INT, P]),
    "kiln_embedding": (P, [P, P]),
    "kiln_gather": (P, [P, INT, P]),
    "kiln_nll_loss": (P, [P, P, INT]),
    "kiln_cross_entropy": (P, [P, P, INT]),
    "kiln_mse_loss": (P, [P, P, INT]),
    "kiln_conv2d": (P, [P, P, P, I64P, I64P]),
    "kiln_max_pool2d": (P, [P, I64P, I64P, I64P]),
    "kiln_dropout": (P, [P, D, B, P]),
    "kiln_is_grad_enabled": (B, []),
    "kiln_set_grad_enabled": (B, [B]),
    "kiln_set_requires_grad": (INT, [P, B]),
    "kiln_requires_grad": (B, [P]),
    "kiln_is_leaf": (B, [P]),
    "kiln_tensor_grad": (P, [P]),
    "kiln_tensor_set_grad": (INT, [P, P]),
    "kiln_grad_fn_name": (S, [P]),
    "kiln_backward": (INT, [P, P]),
    "kiln_backward_ex": (INT, [ctypes.POINTER(P), ctypes.POINTER(P), INT,
                               ctypes.POINTER(BackwardOpts)]),
    "kiln_retain_grad": (INT, [P]),
    "kiln_set_anomaly_enabled": (None, [B]),
    "kiln_to_lazy": (P, [P]),
    "kiln_to_cpu": (P, [P]),
    "kiln_mark_step": (INT, []),
    "kiln_lazy_tensors_text": (P, [ctypes.POINTER(P), INT]),
    "kiln_lazy_counter": (I64, [S]),
    "kiln_lazy_metrics_reset": (None, []),
    "kiln_lazy_metrics_report": (P, []),
    "kiln_lazy_metrics_json": (P, []),
    "kiln_lazy_last_compiled_graph": (P, []),
    "kiln_graph_parse": (P, [S, ctypes.c_size_t]),
    "kiln_graph_load": (P, [S]),
    "kiln_graph_free": (None, [P]),
    "kiln_graph_print": (P, [P]),
    "kiln_graph_n_inputs": (INT, [P]),
    "kiln_graph_n_outputs": (INT, [P]),
    "kiln_function_new": (P, [P]),
    "kiln_function_free": (None, [P]),
    "kiln_function_call": (INT, [P, ctypes.POINTER(Value), INT, ctypes.POINTER(Value), INT]),
    "kiln_function_get_stats": (None, [P, ctypes.POINTER(FunctionStats)]),
    "kiln_function_last_optimized_graph": (P, [P]),
    "kiln_function_stats_json": (P, [P]),
    "kiln_nn_module_new": (P, []),
    "kiln_nn_module_free": (None, [P]),
    "kiln_nn_module_add_param": (INT, [P, S, P]),
    "kiln_nn_module_n_params": (INT, [P]),
    "kiln_nn_module_param_name": (S, [P, INT]),
    "kiln_nn_module_param": (P, [P, INT]),
    "kiln_nn_module_find_param": (P, [P, S]),
    "kiln_nn_module_numel": (I64, [P]),
    "kiln_nn_module_to_lazy": (INT, [P]),
    "kiln_nn_module_set_training": (None, [P, B]),
    "kiln_nn_module_is_training": (B, [P]),
    "kiln_nn_linear_new": (P, [P, S, I64, I64, B, P]),
    "kiln_nn_conv2d_new": (P, [P, S, I64, I64, I64, I64, I64, P]),
    "kiln_nn_embedding_new": (P, [P, S, I64, I64, P]),
    "kiln_nn_layer_norm_new": (P, [P, S, I64, D]),
    "kiln_nn_dropout_new": (P, [P, S, D, P]),
    "kiln_nn_lstm_new": (P, [P, S, I64, I64, P]),
    "kiln_nn_forward": (P, [P, P]),
    "kiln_nn_model_new": (P, [S, P]),
    "kiln_nn_module_arch": (S, [P]),
    "kiln_nn_module_forward": (P, [P, P]),
    "kiln_optim_new": (P, [P, ctypes.POINTER(OptimOpts)]),
    "kiln_optim_free": (None, [P]),
    "kiln_optim_step": (INT, [P]),
    "kiln_optim_zero_grad": (INT, [P]),
    "kiln_optim_set_lr": (None, [P, D]),
    "kiln_optim_lr": (D, [P]),
    "kiln_optim_steps": (I64, [P]),
    "kiln_optim_to_lazy": (INT, [P]),
    "kiln_checkpoint_save": (INT, [P, P, P, P]),
    "kiln_checkpoint_load": (INT, [P, S, P, P, P]),
    "kiln_nn_train_opts_default": (None, [ctypes.POINTER(TrainOpts)]),
    "kiln_nn_train_opts_size": (ctypes.c_size_t, []),
    "kiln_nn_mode_parse": (INT, [S]),
    "kiln_nn_train": (INT, [ctypes.POINTER(TrainOpts), ctypes.POINTER(TrainResult)]),
    "kiln_nn_train_result_free": (None, [ctypes.POINTER(TrainResult)]),
    "kiln_nn_eval_checkpoint": (INT, [S, S, I64, ctypes.POINTER(D), ctypes.POINTER(D)]),
    "kiln_npy_load": (P, [S]),
    "kiln_npy_save": (INT, [S, P]),
}
for _unary in ("neg abs exp log sqrt rsqrt sin cos tanh sigmoid erf sign relu silu "
               "squeeze").split():
    _SIGS["kiln_" + _unary] = (P, [P])
for _binary in "add sub mul div pow maximum minimum eq ne lt le gt ge mm bmm matmul".split():
    _SIGS["kiln_" + _binary] = (P, [P, P])

for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

# TrainOpts mirrors kiln_nn_train_opts field by field: a library whose
# struct differs would have kiln_nn_train_opts_default write past it.
if lib.kiln_nn_train_opts_size() != ctypes.sizeof(TrainOpts):
    raise ImportError("kiln: this package's TrainOpts (%d bytes) does not match the library's "
                      "kiln_nn_train_opts (%d bytes): package and libkiln.so are from different "
                      "versions" % (ctypes.sizeof(TrainOpts), lib.kiln_nn_train_opts_size()))

# kiln_status codes -> exception classes (kiln/errors.py fills this in).
STATUS = {}


def error(status=None):
    """The exception for the last failed call: kiln's message, with the
    class its status names (KilnError when the call returned NULL)."""
    from .errors import for_status
    msg = (lib.kiln_last_error() or b"").decode("utf-8", "replace") or "kiln call failed"
    if status is None:
        status = lib.kiln_last_status()
    lib.kiln_clear_error()
    return for_status(status)(msg)


def check(status):
    """Raises for a negative kiln_status; returns it otherwise."""
    if status < 0:
        raise error(status)
    return status


def ptr(p):
    """Raises for a NULL result; returns the pointer otherwise."""
    if not p:
        raise error()
    return p


def take_string(p):
    """A kiln-allocated char* as str; frees it (kiln_free). None for NULL."""
    if not p:
        return None
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        lib.kiln_free(p)


def shape_array(shape):
    shape = [int(s) for s in shape]
    return len(shape), (ctypes.c_int64 * max(len(shape), 1))(*shape)
