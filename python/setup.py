"""python/setup.py: the kiln Python package (pure Python, ctypes over
libkiln.so). `pip install ./python` (Debian 12: add --break-system-packages,
or use --target/--prefix) works offline with Debian's python3-setuptools.
When the tree's build/ holds libkiln.so (make), a copy is bundled in the
package, so the installed package needs nothing else; otherwise kiln finds
the library installed by `make install` or on the system path."""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(HERE, "..", "include", "kiln.h")) as f:
        for line in f:
            if line.startswith("#define KILN_VERSION_STRING"):
                return line.split('"')[1]
    return "0.0.0"


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        libs = sorted(glob.glob(os.path.join(HERE, "..", "build", "libkiln.so.*.*.*")))
        if libs:
            shutil.copy(libs[-1], os.path.join(self.build_lib, "kiln"))


setup(
    name="kiln",
    version=version(),
    description="Python bindings of kiln, a deep-learning runtime in C11 (ctypes)",
    packages=["kiln"],
    python_requires=">=3.9",
    install_requires=["numpy"],
    cmdclass={"build_py": BuildWithLibrary},
)
