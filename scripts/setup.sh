#!/usr/bin/env bash
# Installs everything msf-pio needs on a fresh Debian machine with Python 3.11: the cross
# toolchains and QEMU (emulated boards), a virtual environment .venv holding msf-pio and its
# test dependencies at the versions of constraints.txt (Debian's Python refuses pip installs
# outside one), and PlatformIO's core packages laid out offline (no PlatformIO registry needed).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES="gcc-arm-none-eabi picolibc-arm-none-eabi gcc-riscv64-unknown-elf \
picolibc-riscv64-unknown-elf gcc-xtensa-lx106 clang qemu-system-arm qemu-system-misc valgrind \
python3-venv"

missing=""
for p in $APT_PACKAGES; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing Debian packages:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

VENV=.venv
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating the virtual environment $VENV"
  python3 -m venv "$VENV"
fi
echo "setup: installing msf-pio and its test dependencies into $VENV (constraints.txt)"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[test]"

"$VENV/bin/python" -m msf_pio.pio.bootstrap
echo "setup: done"
