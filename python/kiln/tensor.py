"""kiln.tensor: kiln.Tensor, a Python handle on one kiln_tensor reference,
with numpy interop both ways, operators, the common ops and autograd.

Memory. A Tensor owns one reference and releases it when collected.
``np.asarray(t)`` is a view of t's memory (``__array_interface__``; the
array keeps t alive). ``from_numpy(a)`` makes a Tensor over a's memory
(kiln_from_blob; the Tensor keeps a alive) when a is writeable, of a kiln
dtype and its strides are non-negative multiples of the element size;
otherwise it copies. Lazy tensors are synced first, so their arrays are
copies."""

import ctypes
import numbers

import numpy as np

from . import _lib
from ._lib import lib, check, ptr

float32, float64, int64, bool_ = "float32", "float64", "int64", "bool"
int32, int16, int8, uint8 = "int32", "int16", "int8", "uint8"
float16, bfloat16 = "float16", "bfloat16"
# in kiln_dtype order (include/kiln.h), named as torch names them
dtypes = (float32, float64, int64, bool_, int32, int16, int8, uint8, float16, bfloat16)
_CODES = {d: i for i, d in enumerate(dtypes)}
_CODES.update({"half": 8, "float": 0, "double": 1, "long": 2, "int": 4, "short": 5})
_NAMES = dict(enumerate(dtypes))
# numpy's types of kiln's dtypes; numpy has no bfloat16 (as torch, .numpy() refuses it)
_NP = {0: np.dtype("<f4"), 1: np.dtype("<f8"), 2: np.dtype("<i8"), 3: np.dtype("?"),
       4: np.dtype("<i4"), 5: np.dtype("<i2"), 6: np.dtype("i1"), 7: np.dtype("u1"),
       8: np.dtype("<f2")}
_FROM_NP = {np.dtype(v.name): k for k, v in _NP.items()}
# numpy dtypes kiln lacks (uint16, uint32, uint64, float128), converted (copied) on the way in.
_WIDEN = {"i": np.int64, "u": np.int64, "f": np.float64}
_INTS = (int32, int16, int8, uint8)


def _np_of(code):
    if code not in _NP:
        raise TypeError("kiln: numpy has no %s; convert first, e.g. t.to(kiln.float32).numpy()"
                        % _NAMES[code])
    return _NP[code]


def _code(dtype):
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype in _CODES:
        return _CODES[dtype]
    d = np.dtype(dtype)
    if d in _FROM_NP:
        return _FROM_NP[d]
    raise TypeError("kiln has no dtype %r (it has %s)" % (dtype, ", ".join(dtypes)))


# Arrays whose memory a Tensor shares, kept alive until kiln releases it.
_shared = {}
_next_key = [1]


@_lib.RELEASE_FN
def _release(ctx):
    _shared.pop(ctx, None)


class Tensor:
    """A kiln tensor: CPU or lazy, of dtype float32, float64, int64 or bool.

    Build one with kiln.tensor(data), kiln.from_numpy(array), kiln.zeros,
    ones, full, arange, rand, randn. Arithmetic operators broadcast and
    promote like PyTorch; Python numbers become 0-d tensors."""

    __slots__ = ("_h", "__weakref__")

    def __init__(self, handle):
        """Takes ownership of one reference to a kiln_tensor (use the
        factory functions instead)."""
        self._h = ptr(handle)

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and _lib is not None and lib is not None:
            lib.kiln_release(h)

    # ---- metadata ----------------------------------------------------
    @property
    def shape(self):
        """The sizes, a tuple."""
        n = lib.kiln_tensor_ndim(self._h)
        s = lib.kiln_tensor_shape(self._h)
        return tuple(s[i] for i in range(n))

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    @property
    def ndim(self):
        return lib.kiln_tensor_ndim(self._h)

    def dim(self):
        return self.ndim

    def numel(self):
        return lib.kiln_tensor_numel(self._h)

    def stride(self):
        """Strides in elements."""
        n = lib.kiln_tensor_ndim(self._h)
        s = lib.kiln_tensor_strides(self._h)
        return tuple(s[i] for i in range(n))

    @property
    def dtype(self):
        """The dtype's name, as torch's: "float32", "float64", "int64", "bool", "int32",
        "int16", "int8", "uint8", "float16" or "bfloat16" (also kiln.float16 etc.)."""
        return _NAMES[lib.kiln_tensor_dtype(self._h)]

    def is_contiguous(self):
        return lib.kiln_tensor_is_contiguous(self._h)

    @property
    def is_lazy(self):
        return lib.kiln_tensor_is_lazy(self._h)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- numpy -------------------------------------------------------
    @property
    def __array_interface__(self):
        if self.is_lazy:
            # numpy then takes __array__ (a synced copy that keeps itself alive)
            raise AttributeError("lazy tensors have no CPU memory to share")
        item = _np_of(lib.kiln_tensor_dtype(self._h)).itemsize
        data = lib.kiln_tensor_data(self._h)
        if not data and self.numel() == 0:
            data = 0
        return {"version": 3, "shape": self.shape,
                "typestr": _np_of(lib.kiln_tensor_dtype(self._h)).str,
                "data": (data or 0, False),
                "strides": tuple(s * item for s in self.stride())}

    def numpy(self):
        """A numpy array sharing this tensor's memory (a copy for lazy tensors)."""
        if self.is_lazy:
            t = self.cpu()
            return np.asarray(t)
        return np.asarray(self)

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        if self.dtype == bfloat16:
            return self.to(float32).numpy().tolist()  # bfloat16 -> float32 is exact
        return self.numpy().tolist()

    def item(self):
        """The value of a one-element tensor as a Python number."""
        v = ctypes.c_double()
        check(lib.kiln_item(self._h, ctypes.byref(v)))
        d = self.dtype
        if d == int64:
            return int(self.numpy().reshape(()))  # exact beyond 2^53
        if d == bool_:
            return bool(v.value)
        if d in _INTS:
            return int(v.value)  # exact: 32 bits at most
        return v.value

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    def __repr__(self):
        extra = ""
        if self.is_lazy:
            extra += ", device='lazy'"
        if self.requires_grad:
            fn = self.grad_fn
            extra += ", grad_fn=<%s>" % fn if fn else ", requires_grad=True"
        shown = self.to(float32) if self.dtype == bfloat16 else self
        body = np.array2string(shown.numpy(), separator=", ", prefix="tensor(")
        return "tensor(%s, dtype=%s%s)" % (body, self.dtype, extra)

    # ---- devices and copies ------------------------------------------
    def cpu(self):
        """The CPU value (syncs a lazy tensor's pending graph)."""
        return Tensor(lib.kiln_to_cpu(self._h))

    def lazy(self):
        """A lazy tensor holding this tensor's values (see kiln.lazy)."""
        return Tensor(lib.kiln_to_lazy(self._h))

    def to(self, dtype):
        return Tensor(lib.kiln_to_dtype(self._h, _code(dtype)))

    def float(self):
        return self.to(float32)

    def double(self):
        return self.to(float64)

    def long(self):
        return self.to(int64)

    def contiguous(self):
        return Tensor(lib.kiln_contiguous(self._h))

    def clone(self):
        return Tensor(lib.kiln_clone(self._h))

    def detach(self):
        return Tensor(lib.kiln_detach(self._h))

    # ---- autograd ----------------------------------------------------
    @property
    def requires_grad(self):
        return lib.kiln_requires_grad(self._h)

    @requires_grad.setter
    def requires_grad(self, value):
        check(lib.kiln_set_requires_grad(self._h, bool(value)))

    def requires_grad_(self, value=True):
        self.requires_grad = value
        return self

    @property
    def is_leaf(self):
        return lib.kiln_is_leaf(self._h)

    @property
    def grad_fn(self):
        """The name of the op that made this tensor ("aten::mul"), or None."""
        n = lib.kiln_grad_fn_name(self._h)
        return n.decode() if n else None

    @property
    def grad(self):
        """The accumulated gradient (a Tensor), or None."""
        g = lib.kiln_tensor_grad(self._h)
        return Tensor(lib.kiln_retain(g)) if g else None

    @grad.setter
    def grad(self, value):
        check(lib.kiln_tensor_set_grad(self._h, None if value is None else value._h))

    def retain_grad(self):
        check(lib.kiln_retain_grad(self._h))

    def backward(self, gradient=None, retain_graph=False, create_graph=False):
        """Accumulates d self / d leaf into every leaf's .grad. gradient
        defaults to ones (self must have one element then)."""
        # Never take ._h of an unnamed temporary: it is freed before the call.
        g = None if gradient is None else as_tensor(gradient)
        if not retain_graph and not create_graph:
            check(lib.kiln_backward(self._h, None if g is None else g._h))
            return
        roots = (ctypes.c_void_p * 1)(self._h)
        grads = (ctypes.c_void_p * 1)(None if g is None else g._h)
        opts = _lib.BackwardOpts(retain_graph, create_graph, None, 0)
        check(lib.kiln_backward_ex(roots, grads, 1, ctypes.byref(opts)))

    # ---- shape ops ---------------------------------------------------
    def view(self, *shape):
        n, a = _lib.shape_array(_shape_args(shape))
        return Tensor(lib.kiln_view(self._h, n, a))

    def reshape(self, *shape):
        n, a = _lib.shape_array(_shape_args(shape))
        return Tensor(lib.kiln_reshape(self._h, n, a))

    def flatten(self):
        return self.reshape(-1)

    def expand(self, *shape):
        n, a = _lib.shape_array(_shape_args(shape))
        return Tensor(lib.kiln_expand(self._h, n, a))

    def t(self):
        return Tensor(lib.kiln_t(self._h))

    @property
    def T(self):
        if self.ndim < 2:
            return self
        return self.permute(*reversed(range(self.ndim)))

    def transpose(self, dim0, dim1):
        return Tensor(lib.kiln_transpose(self._h, dim0, dim1))

    def permute(self, *dims):
        n, a = _lib.shape_array(_shape_args(dims))
        return Tensor(lib.kiln_permute(self._h, n, a))

    def unsqueeze(self, dim):
        return Tensor(lib.kiln_unsqueeze(self._h, dim))

    def squeeze(self, dim=None):
        if dim is None:
            return Tensor(lib.kiln_squeeze(self._h))
        return Tensor(lib.kiln_squeeze_dim(self._h, dim))

    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        t, dim = self, 0
        for ix in index:
            if ix is None:
                t = t.unsqueeze(dim)
                dim += 1
            elif ix is Ellipsis:
                rest = sum(1 for j in index if j is not None and j is not Ellipsis)
                dim = t.ndim - (rest - _count_before(index, ix))
            elif isinstance(ix, slice):
                start, stop, step = ix.indices(t.shape[dim])
                if step <= 0:
                    raise ValueError("kiln: slices need a positive step")
                t = Tensor(lib.kiln_slice(t._h, dim, start, max(stop, start), step))
                dim += 1
            elif isinstance(ix, numbers.Integral):
                t = Tensor(lib.kiln_select(t._h, dim, int(ix)))
            elif isinstance(ix, Tensor) and ix.dtype == int64 and ix.ndim == 1:
                t = Tensor(lib.kiln_index_select(t._h, dim, ix._h))
                dim += 1
            else:
                raise TypeError("kiln: unsupported index %r" % (ix,))
        return t

    def __setitem__(self, index, value):
        dst, src = self[index], as_tensor(value, self.dtype)
        check(lib.kiln_copy_(dst._h, src._h))

    # ---- in place ----------------------------------------------------
    def copy_(self, src):
        src = as_tensor(src, self.dtype)
        check(lib.kiln_copy_(self._h, src._h))
        return self

    def fill_(self, value):
        check(lib.kiln_fill_(self._h, float(value)))
        return self

    def zero_(self):
        return self.fill_(0)

    def add_(self, other, alpha=1.0):
        other = as_tensor(other, self.dtype)
        check(lib.kiln_add_(self._h, other._h, float(alpha)))
        return self

    def mul_(self, other):
        other = as_tensor(other, self.dtype)
        check(lib.kiln_mul_(self._h, other._h))
        return self

    def sub_(self, other):
        return self.add_(other, -1.0)

    # ---- reductions --------------------------------------------------
    def _reduce(self, fn, dim, keepdim, *extra):
        dims = () if dim is None else (dim if isinstance(dim, (tuple, list)) else (dim,))
        n, a = _lib.shape_array(dims)
        return Tensor(fn(self._h, a if n else None, n, *extra, bool(keepdim)))

    def sum(self, dim=None, keepdim=False):
        return self._reduce(lib.kiln_sum, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        return self._reduce(lib.kiln_mean, dim, keepdim)

    def amax(self, dim=None, keepdim=False):
        return self._reduce(lib.kiln_amax, dim, keepdim)

    def amin(self, dim=None, keepdim=False):
        return self._reduce(lib.kiln_amin, dim, keepdim)

    def max(self, dim=None, keepdim=False):
        return self.amax(dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return self.amin(dim, keepdim)

    def var(self, dim=None, correction=1, keepdim=False):
        return self._reduce(lib.kiln_var, dim, keepdim, int(correction))

    def argmax(self, dim=None, keepdim=False):
        return Tensor(lib.kiln_argmax(self._h, 0 if dim is None else dim, dim is None,
                                      bool(keepdim)))

    # ---- elementwise -------------------------------------------------
    def softmax(self, dim):
        return Tensor(lib.kiln_softmax(self._h, dim))

    def log_softmax(self, dim):
        return Tensor(lib.kiln_log_softmax(self._h, dim))

    def clamp(self, min=None, max=None):
        return Tensor(lib.kiln_clamp(self._h, float("nan") if min is None else float(min),
                                     float("nan") if max is None else float(max)))

    def leaky_relu(self, negative_slope=0.01):
        return Tensor(lib.kiln_leaky_relu(self._h, float(negative_slope)))

    def gelu(self, approximate="none"):
        return Tensor(lib.kiln_gelu(self._h, approximate == "tanh"))

    def matmul(self, other):
        other = as_tensor(other)
        return Tensor(lib.kiln_matmul(self._h, other._h))

    def __matmul__(self, other):
        return self.matmul(other)

    def __rmatmul__(self, other):
        return as_tensor(other).matmul(self)

    def __neg__(self):
        return Tensor(lib.kiln_neg(self._h))

    def __abs__(self):
        return Tensor(lib.kiln_abs(self._h))

    def __pos__(self):
        return self

    def __pow__(self, other):
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            return Tensor(lib.kiln_pow_scalar(self._h, float(other)))
        return _binary(lib.kiln_pow, self, other)

    def __rpow__(self, other):
        return _binary(lib.kiln_pow, as_tensor(other), self)

    __hash__ = object.__hash__


def _count_before(index, item):
    n = 0
    for j in index:
        if j is item:
            return n
        if j is not None:
            n += 1
    return n


def _shape_args(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _unary_method(name):
    f = getattr(lib, "kiln_" + name)

    def method(self):
        return Tensor(f(self._h))

    method.__name__ = name
    method.__doc__ = "Elementwise %s (kiln_%s)." % (name, name)
    return method


for _n in "neg abs exp log sqrt rsqrt sin cos tanh sigmoid erf sign relu silu".split():
    setattr(Tensor, _n, _unary_method(_n))


def _binary(f, a, b):
    a = as_tensor(a)
    b = as_tensor(b, None)
    return Tensor(f(a._h, b._h))


def _binary_methods(name, cname, reflect=True):
    f = getattr(lib, "kiln_" + cname)
    setattr(Tensor, "__%s__" % name, lambda self, other: _binary(f, self, other))
    if reflect:
        setattr(Tensor, "__r%s__" % name, lambda self, other: _binary(f, other, self))


def _is_number(x):
    """A Python float (ints take the 0-d int64 path, so int stays int)."""
    return isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral)


def _scalar_methods(name, cname, scalar_fn, rscalar):
    """Python numbers take kiln's *_scalar ops (a wrapped number: an int
    tensor plus 1.5 is float32, as in PyTorch)."""
    f, fs = getattr(lib, "kiln_" + cname), getattr(lib, scalar_fn)

    def op(self, other):
        if _is_number(other):
            return Tensor(fs(self._h, float(other)))
        return _binary(f, self, other)

    def rop(self, other):
        if _is_number(other) and rscalar is not None:
            return rscalar(self, float(other))
        return _binary(f, other, self)

    setattr(Tensor, "__%s__" % name, op)
    setattr(Tensor, "__r%s__" % name, rop)
    setattr(Tensor, cname, op)


for _fn in ("kiln_add_scalar", "kiln_sub_scalar", "kiln_mul_scalar", "kiln_div_scalar"):
    getattr(lib, _fn).restype = ctypes.c_void_p
    getattr(lib, _fn).argtypes = [ctypes.c_void_p, ctypes.c_double]
_scalar_methods("add", "add", "kiln_add_scalar", lambda t, s: Tensor(lib.kiln_add_scalar(t._h, s)))
def _rsub_scalar(t, s):
    n = -t
    return Tensor(lib.kiln_add_scalar(n._h, s))


_scalar_methods("sub", "sub", "kiln_sub_scalar", _rsub_scalar)
_scalar_methods("mul", "mul", "kiln_mul_scalar", lambda t, s: Tensor(lib.kiln_mul_scalar(t._h, s)))
_scalar_methods("truediv", "div", "kiln_div_scalar", None)
for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    _binary_methods(_n, _n, reflect=False)
    setattr(Tensor, _n, getattr(Tensor, "__%s__" % _n))
Tensor.maximum = lambda self, other: _binary(lib.kiln_maximum, self, other)
Tensor.minimum = lambda self, other: _binary(lib.kiln_minimum, self, other)


def as_tensor(x, dtype=None):
    """x as a Tensor: a Tensor as is; a Python number as a 0-d tensor
    (bool, int64 or float64: as in PyTorch a 0-d operand does not change a
    tensor's dtype within its category); anything else through numpy."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, bool):
        return Tensor(lib.kiln_scalar(float(x), 3))
    if isinstance(x, numbers.Integral):
        t = Tensor(lib.kiln_scalar(0.0, 2))
        ctypes.cast(lib.kiln_tensor_data(t._h), ctypes.POINTER(ctypes.c_int64))[0] = int(x)
        return t
    if isinstance(x, numbers.Real):
        return Tensor(lib.kiln_scalar(float(x), 1))
    return tensor(x, dtype)


def from_numpy(a):
    """A Tensor over a's memory (shared: writes show on both sides) when a
    is writeable, of a kiln dtype (float32, float64, int64, bool, int32,
    int16, int8, uint8, float16) and has non-negative strides that are
    multiples of its element size; otherwise a copy (uint16, uint32 and
    uint64 become int64, other floats float64)."""
    a = np.asarray(a)
    code = _FROM_NP.get(a.dtype)
    item = a.dtype.itemsize
    if (code is not None and a.flags.writeable and a.dtype.byteorder in "=<|"
            and all(s >= 0 and s % item == 0 for s in a.strides)
            and a.ctypes.data % item == 0 and a.size > 0):
        key = _next_key[0]
        _next_key[0] += 1
        _shared[key] = a
        n, shp = _lib.shape_array(a.shape)
        _, st = _lib.shape_array([s // item for s in a.strides])
        h = lib.kiln_from_blob(a.ctypes.data, n, shp, st, code, _release, key)
        if not h:
            _shared.pop(key, None)
            raise _lib.error()
        return Tensor(h)
    return _copy_from_numpy(a)


def _copy_from_numpy(a, dtype=None):
    if dtype is not None:
        a = a.astype(_np_of(_code(dtype)), copy=False)
    elif a.dtype not in _FROM_NP:
        widen = _WIDEN.get(a.dtype.kind)
        if widen is None:
            raise TypeError("kiln: numpy dtype %s has no kiln equivalent" % a.dtype)
        a = a.astype(widen)
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("=") if a.dtype.byteorder == ">" else None)
    n, shp = _lib.shape_array(a.shape)
    return Tensor(lib.kiln_from_data(a.ctypes.data if a.size else None, n, shp,
                                     _FROM_NP[np.dtype(a.dtype.name)]))


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of data (nested lists, numbers, numpy
    arrays or Tensors). dtype: "float32" (the default for floats),
    "float64", "int64" (default for ints), "bool", or a numpy dtype."""
    if isinstance(data, Tensor):
        t = data.clone() if dtype is None else data.to(dtype)
    else:
        a = np.asarray(data)
        if dtype is None and a.dtype == np.float64 and not isinstance(data, np.ndarray):
            a = a.astype(np.float32)  # Python floats: float32, as torch.tensor
        t = _copy_from_numpy(a, dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def _creator(cfn, fill=None):
    def make(*shape, dtype=float32, requires_grad=False):
        n, a = _lib.shape_array(_shape_args(shape))
        t = Tensor(cfn(n, a, _code(dtype)) if fill is None else cfn(n, a, fill, _code(dtype)))
        if requires_grad:
            t.requires_grad = True
        return t
    return make


zeros = _creator(lib.kiln_zeros)
ones = _creator(lib.kiln_ones)
empty = _creator(lib.kiln_empty)
zeros.__doc__ = "A tensor of zeros: zeros(2, 3) or zeros((2, 3)), dtype float32."
ones.__doc__ = "A tensor of ones."
empty.__doc__ = "An uninitialised tensor."


def full(shape, value, dtype=float32, requires_grad=False):
    n, a = _lib.shape_array(shape)
    t = Tensor(lib.kiln_full(n, a, float(value), _code(dtype)))
    if requires_grad:
        t.requires_grad = True
    return t


def arange(start, end=None, step=1, dtype=None):
    """[start, end) by step, as torch.arange (int64 for integer arguments)."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = int64 if ints else float32
    return Tensor(lib.kiln_arange(float(start), float(end), float(step), _code(dtype)))


def rand(*shape, dtype=float32, requires_grad=False):
    """Uniform [0, 1) from the default generator (kiln.manual_seed)."""
    n, a = _lib.shape_array(_shape_args(shape))
    t = Tensor(lib.kiln_rand(n, a, _code(dtype), None))
    if requires_grad:
        t.requires_grad = True
    return t


def randn(*shape, dtype=float32, requires_grad=False):
    """Standard normal from the default generator."""
    n, a = _lib.shape_array(_shape_args(shape))
    t = Tensor(lib.kiln_randn(n, a, _code(dtype), None))
    if requires_grad:
        t.requires_grad = True
    return t


def manual_seed(seed):
    lib.kiln_manual_seed(int(seed))
