#!/usr/bin/python3
"""scripts/golden/npy.py: writes the reference .npy files that
tests/nn/test_npy.c reads (tests/data/npy/*.npy), with numpy itself.

Run from the repository root: /usr/bin/python3 scripts/golden/npy.py
The values are simple formulas the C test recomputes independently (see the
comment beside each file). Files written with np.save are also what kiln's
writer must reproduce byte for byte. Needs numpy 1.24 (Debian's
python3-numpy); `make test` only reads the committed files.
"""
import os

import numpy as np
from numpy.lib import format as npformat

OUT = os.path.join("tests", "data", "npy")


def save(name, a):
    np.save(os.path.join(OUT, name), a)


def save_version(name, a, version):
    with open(os.path.join(OUT, name), "wb") as f:
        npformat.write_array(f, a, version=version)


def main():
    os.makedirs(OUT, exist_ok=True)
    # element i (C order) = 0.5 * i - 1
    save("f4_2x3.npy", (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3))
    # element i = 0.25 * i - 3
    save("f8_2x3x4.npy", (np.arange(24, dtype=np.float64) * 0.25 - 3).reshape(2, 3, 4))
    # exact int64 values, including ones a double cannot hold
    save("i8_5.npy", np.array([0, -1, 2**40 + 1, -2**62 - 3, 2**63 - 1], dtype=np.int64))
    save("b1_7.npy", np.array([1, 0, 1, 1, 0, 0, 1], dtype=np.bool_))
    save("i4_2x2.npy", np.array([[-2**31, 2**31 - 1], [0, -5]], dtype=np.int32))
    save("u1_4.npy", np.array([0, 1, 128, 255], dtype=np.uint8))
    save("f8_0d.npy", np.array(3.25, dtype=np.float64))
    save("f4_0x3.npy", np.zeros((0, 3), dtype=np.float32))
    # element [i, j] = 4 * i + j
    save("f4_3x4.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
    # Fortran order: C-order element i of the logical array is i
    save("f4_fortran_3x4.npy", np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)))
    save("i8_fortran_2x3x4.npy", np.asfortranarray(np.arange(24, dtype=np.int64).reshape(2, 3, 4)))
    save("b1_fortran_2x3.npy", np.asfortranarray(np.array([[1, 0, 0], [1, 1, 0]], dtype=np.bool_)))
    # format versions 2.0 and 3.0 of f4_2x3
    a = (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3)
    save_version("f4_v2_2x3.npy", a, (2, 0))
    save_version("f4_v3_2x3.npy", a, (3, 0))
    for name in sorted(os.listdir(OUT)):
        print(os.path.join(OUT, name))


if __name__ == "__main__":
    main()
