#!/usr/bin/env bash
# Installs everything msf-pio needs on a fresh Debian machine with Python 3.11:
# the cross toolchains and QEMU (emulated boards), the Python package with its test extras,
# and PlatformIO's core packages laid out offline (no PlatformIO registry needed).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES="gcc-arm-none-eabi picolibc-arm-none-eabi gcc-riscv64-unknown-elf \
picolibc-riscv64-unknown-elf qemu-system-arm qemu-system-misc valgrind"

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

echo "setup: installing msf-pio and its test dependencies"
python3 -m pip install -q --disable-pip-version-check -e ".[test]"

if python3 -c "import msf_pio.pio.bootstrap" 2>/dev/null; then
  python3 -m msf_pio.pio.bootstrap
fi
echo "setup: done"
