#!/bin/sh
# scripts/deps.sh: installs the Debian packages kiln needs, when missing.
# Usage: sh scripts/deps.sh [--test|--python|--fuzz|--tsan|--mpi|--coverage]   (what the test
# suite / the Python package's tests / make fuzz / make test TSAN=1 / make MPI=1 / make coverage add)
set -e
PKGS="build-essential libopenblas-dev libjansson-dev zlib1g-dev pkgconf dataset-fashion-mnist"
if [ "$1" = "--test" ]; then
  PKGS="$PKGS graphviz"
fi
if [ "$1" = "--python" ]; then
  PKGS="$PKGS python3-numpy python3-pytest python3-pip python3-setuptools python3-wheel"
fi
if [ "$1" = "--mpi" ]; then
  PKGS="$PKGS libopenmpi-dev openmpi-bin"
fi
if [ "$1" = "--coverage" ]; then
  PKGS="$PKGS lcov"
fi
if [ "$1" = "--fuzz" ] || [ "$1" = "--tsan" ]; then
  PKGS="$PKGS clang libomp-dev"  # --tsan: libomp-dev has libarcher.so
fi
missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0
echo "deps.sh: installing:$missing"
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "deps.sh: these Debian packages are missing:$missing" >&2
    echo "deps.sh: run as root (or install them): apt-get install$missing" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq $missing
