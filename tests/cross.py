"""The cross compilers the generated C and the runtime must build with, warning-free. The C
library is picolibc, the one of the emulated boards (scripts/setup.sh installs it); the Xtensa
stand-in has none, so it takes the msf-qemu platform's string.h."""
from pathlib import Path

from msf_pio.pio import PLATFORM_DIR

CROSS = {
    "cortex-m7": ["arm-none-eabi-gcc", "--specs=picolibc.specs", "-mcpu=cortex-m7", "-mthumb",
                  "-mfloat-abi=hard", "-mfpu=fpv5-d16"],
    "cortex-m4": ["arm-none-eabi-gcc", "--specs=picolibc.specs", "-mcpu=cortex-m4", "-mthumb",
                  "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"],
    "rv32imac": ["riscv64-unknown-elf-gcc", "--specs=picolibc.specs", "-march=rv32imac",
                 "-misa-spec=2.2", "-mabi=ilp32"],
    "xtensa-lx106": ["xtensa-lx106-elf-gcc", f"-I{Path(PLATFORM_DIR) / 'xtensa' / 'include'}"],
}
