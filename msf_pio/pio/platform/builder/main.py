"""SCons build script of msf-qemu: Debian cross GCC (+ picolibc on Cortex-M and RISC-V; nothing
on the Xtensa stand-in, whose toolchain has no C library), QEMU as the upload step.

Memory comes from the board manifest only (build.flash_origin/ram_origin/stack_size,
upload.maximum_size/maximum_ram_size; `board_*` options in platformio.ini override them): a
generated linker script sets the memory symbols, so the linker and PlatformIO's size check
enforce the same limits as the real part. Board services (console, cycles, stack, exit, start-up
on Xtensa) are the msf-pio library's, library/src/board/qemu_*.c: -DMSF_QEMU selects them.
"""

import os
import re

from SCons.Script import (  # pylint: disable=import-error
    COMMAND_LINE_TARGETS, AlwaysBuild, Default, DefaultEnvironment)

env = DefaultEnvironment()
platform = env.PioPlatform()
board = env.BoardConfig()
XTENSA = os.path.join(platform.get_dir(), "xtensa")

arch = board.get("build.arch")
PREFIX = {"arm": "arm-none-eabi-", "riscv": "riscv64-unknown-elf-",
          "xtensa": "xtensa-lx106-elf-"}[arch]
cpu_flags = list(board.get("build.cpu_flags"))

env.Replace(
    AR=PREFIX + "ar", AS=PREFIX + "gcc", CC=PREFIX + "gcc", CXX=PREFIX + "g++",
    GDB="gdb-multiarch", OBJCOPY=PREFIX + "objcopy", RANLIB=PREFIX + "ranlib",
    SIZETOOL=PREFIX + "size",
    ARFLAGS=["rc"],
    PROGNAME="firmware", PROGSUFFIX=".elf",
    SIZEPRINTCMD="$SIZETOOL -B -d $SOURCES",
)

env.Append(
    ASPPFLAGS=["-x", "assembler-with-cpp"],
    CCFLAGS=["-Os", "-ffunction-sections", "-fdata-sections", "-Wall"],
    CXXFLAGS=["-fno-rtti", "-fno-exceptions"],
    CPPDEFINES=[("F_CPU", "$BOARD_F_CPU"), "MSF_QEMU"],
    LINKFLAGS=["-Wl,--gc-sections", "-Wl,-Map,%s" % os.path.join("$BUILD_DIR", "firmware.map")],
)
if arch == "xtensa":
    # Freestanding: no libc headers or start files; string.h and the linker script are the
    # platform's, start-up and mem* the library's; libgcc for 64-bit and division helpers.
    env.Append(ASFLAGS=cpu_flags, CCFLAGS=cpu_flags + ["-ffreestanding"],
               CPPPATH=[os.path.join(XTENSA, "include")], LIBPATH=[XTENSA],
               LINKFLAGS=cpu_flags + ["-nostdlib"], LIBS=["gcc"])
    BASE_LDSCRIPT = "msf_xtensa.ld"
else:
    # --specs on compile lines too: it adds picolibc's include path. crt0-hosted copies .data,
    # zeroes .bss, sets TLS, runs constructors, exit(main()).
    common = cpu_flags + ["--specs=picolibc.specs"]
    env.Append(ASFLAGS=common, CCFLAGS=common, LINKFLAGS=common + ["--crt0=hosted"])
    BASE_LDSCRIPT = "picolibc.ld"


def weights_section():
    """custom_msf_weights_section, if the board maps further memory for it (msf-pio checks the
    name; one that is not a plain section name is left to its error)."""
    name = (env.GetProjectOption("custom_msf_weights_section", "") or "").strip()
    if board.get("build.weights_origin", "") and \
            re.match(r"^\.?[A-Za-z_][A-Za-z0-9_.]{0,62}$", name):
        return name
    return None


WEIGHTS = weights_section()


def weights_region():
    """The weights section in the machine's further memory (build.weights_origin,
    upload.maximum_weights_size), which QEMU's ELF loader fills as a programmer fills a real
    board's external flash."""
    if not WEIGHTS:
        return ""
    return ("MEMORY { msf_weights (r) : ORIGIN = %s, LENGTH = %s }\n"
            "SECTIONS { %s : { *(%s) } > msf_weights }\n"
            % (board.get("build.weights_origin"), board.get("upload.maximum_weights_size"),
               WEIGHTS, WEIGHTS))


def write_ldscript():
    """Board memory as the base script's inputs; -T here suppresses picolibc's own -T."""
    path = os.path.join(env.subst("$BUILD_DIR"), "msf_qemu.ld")
    text = "".join("%s = %s;\n" % kv for kv in (
        ("__flash", board.get("build.flash_origin")),
        ("__flash_size", board.get("upload.maximum_size")),
        ("__ram", board.get("build.ram_origin")),
        ("__ram_size", board.get("upload.maximum_ram_size")),
        ("__stack_size", board.get("build.stack_size")),
    )) + "INCLUDE %s\n" % BASE_LDSCRIPT + weights_region()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    old = open(path, encoding="ascii").read() if os.path.isfile(path) else None
    if old != text:  # rewriting an unchanged file would relink every time
        with open(path, "w", encoding="ascii") as fp:
            fp.write(text)
    return path


env.Replace(LDSCRIPT_PATH=write_ldscript())

if "nobuild" in COMMAND_LINE_TARGETS:
    target_elf = os.path.join("$BUILD_DIR", "${PROGNAME}.elf")
else:
    target_elf = env.BuildProgram()
AlwaysBuild(env.Alias("nobuild", target_elf))
if WEIGHTS:
    # PlatformIO's size check (size -B) counts every read-only section against
    # upload.maximum_size: it reads a copy without the weights, which are not in that flash
    internal = os.path.join(env.subst("$BUILD_DIR"), "firmware-internal.elf")
    env.AddPostAction(target_elf, env.VerboseAction(
        "$OBJCOPY -R %s $TARGET %s" % (WEIGHTS, internal), "Leaving out %s" % WEIGHTS))
    env.Replace(SIZECHECKCMD="$SIZETOOL -B -d " + internal,
                SIZEPROGREGEXP=r"^(\d+)\s+(\d+)\s+\d+\s",
                SIZEDATAREGEXP=r"^\d+\s+(\d+)\s+(\d+)\s+\d+")

timeout = env.GetProjectOption("custom_qemu_timeout", "60")
env.Replace(UPLOADCMD=platform.run_command_line(
    env.subst("$BOARD"), "$SOURCE", timeout=timeout, python=env.subst("$PYTHONEXE")))
if "__test" in COMMAND_LINE_TARGETS:
    # `pio test`: the testing stage runs QEMU itself (test_custom_runner.py); uploading
    # only has to build, or the firmware would run twice.
    upload_actions = []
else:
    upload_actions = [env.VerboseAction("$UPLOADCMD", "Running $PROGNAME in QEMU")]
AlwaysBuild(env.Alias("upload", target_elf, upload_actions))

AlwaysBuild(env.Alias("size", target_elf, env.VerboseAction("$SIZEPRINTCMD",
                                                            "Calculating size $SOURCE")))
Default([target_elf])
