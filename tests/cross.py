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

# The compilers a user's build really meets, stood in for here (issue 18): platform-ststm32 gives
# stm32cube GCC 7.2.1, whose <arm_acle.h> lacks the SIMD32 and saturation intrinsics (tests/c/gcc7
# holds a stand-in of its header, first on the include path) and whose default dialect is gnu11;
# clang for Cortex-M and RV32. Flags as PlatformIO's builds: -Os.
GCC7_HEADERS = Path(__file__).parent / "c" / "gcc7"
_PICOLIBC = "/usr/lib/picolibc/{}/include"
TOOLCHAINS = {
    "gcc7-headers-m4": [*CROSS["cortex-m4"], "-std=gnu11", f"-isystem{GCC7_HEADERS}"],
    "gcc7-headers-m7": [*CROSS["cortex-m7"], "-std=gnu11", f"-isystem{GCC7_HEADERS}"],
    "clang-m4": ["clang", "--target=thumbv7em-none-eabihf", "-mcpu=cortex-m4", "-mfloat-abi=hard",
                 "-mfpu=fpv4-sp-d16", f"-isystem{_PICOLIBC.format('arm-none-eabi')}",
                 "-std=gnu11"],
    "clang-m7": ["clang", "--target=thumbv7em-none-eabihf", "-mcpu=cortex-m7", "-mfloat-abi=hard",
                 "-mfpu=fpv5-d16", f"-isystem{_PICOLIBC.format('arm-none-eabi')}", "-std=gnu11"],
    "clang-rv32": ["clang", "--target=riscv32-unknown-elf", "-march=rv32imac", "-mabi=ilp32",
                   f"-isystem{_PICOLIBC.format('riscv64-unknown-elf')}", "-std=gnu11"],
}
