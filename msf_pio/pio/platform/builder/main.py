"""SCons build script of msf-qemu: Debian cross GCC + picolibc, QEMU as the upload step.

Memory comes from the board manifest only (build.flash_origin/ram_origin/stack_size,
upload.maximum_size/maximum_ram_size; `board_*` options in platformio.ini override them): a
generated linker script sets picolibc.ld's symbols, so the linker and PlatformIO's size check
enforce the same limits as the real part.
"""

import os

from SCons.Script import (  # pylint: disable=import-error
    COMMAND_LINE_TARGETS, AlwaysBuild, Default, DefaultEnvironment)

env = DefaultEnvironment()
platform = env.PioPlatform()
board = env.BoardConfig()
RUNTIME = os.path.join(platform.get_dir(), "runtime")

arch = board.get("build.arch")
PREFIX = {"arm": "arm-none-eabi-", "riscv": "riscv64-unknown-elf-"}[arch]
cpu_flags = list(board.get("build.cpu_flags"))

env.Replace(
    AR=PREFIX + "ar", AS=PREFIX + "gcc", CC=PREFIX + "gcc", CXX=PREFIX + "g++",
    GDB="gdb-multiarch", OBJCOPY=PREFIX + "objcopy", RANLIB=PREFIX + "ranlib",
    SIZETOOL=PREFIX + "size",
    ARFLAGS=["rc"],
    PROGNAME="firmware", PROGSUFFIX=".elf",
    SIZEPRINTCMD="$SIZETOOL -B -d $SOURCES",
)

# --specs on compile lines too: it adds picolibc's include path.
common = cpu_flags + ["--specs=picolibc.specs"]
env.Append(
    ASFLAGS=common,
    ASPPFLAGS=["-x", "assembler-with-cpp"],
    CCFLAGS=common + ["-Os", "-ffunction-sections", "-fdata-sections", "-Wall"],
    CXXFLAGS=["-fno-rtti", "-fno-exceptions"],
    CPPDEFINES=[("F_CPU", "$BOARD_F_CPU"), "MSF_QEMU"],
    CPPPATH=[os.path.join(RUNTIME, "include")],
    # crt0-hosted: copies .data, zeroes .bss, sets TLS, runs constructors, exit(main()).
    LINKFLAGS=common + ["--crt0=hosted", "-Wl,--gc-sections",
                        "-Wl,-Map,%s" % os.path.join("$BUILD_DIR", "firmware.map")],
)


def write_ldscript():
    """Board memory as picolibc.ld's inputs; -T here suppresses the spec's own -T."""
    path = os.path.join(env.subst("$BUILD_DIR"), "msf_qemu.ld")
    text = "".join("%s = %s;\n" % kv for kv in (
        ("__flash", board.get("build.flash_origin")),
        ("__flash_size", board.get("upload.maximum_size")),
        ("__ram", board.get("build.ram_origin")),
        ("__ram_size", board.get("upload.maximum_ram_size")),
        ("__stack_size", board.get("build.stack_size")),
    )) + "INCLUDE picolibc.ld\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    old = open(path, encoding="ascii").read() if os.path.isfile(path) else None
    if old != text:  # rewriting an unchanged file would relink every time
        with open(path, "w", encoding="ascii") as fp:
            fp.write(text)
    return path


env.Replace(LDSCRIPT_PATH=write_ldscript())

# Board services (UART stdio, cycle counter, stack paint, exit) as objects, not a library:
# their constructors and the SysTick handler must be linked even though nothing calls them.
env.BuildSources(os.path.join("$BUILD_DIR", "msf_board"), os.path.join(RUNTIME, "src"),
                 "+<board_common.c> +<board_%s.c>" % arch)

if "nobuild" in COMMAND_LINE_TARGETS:
    target_elf = os.path.join("$BUILD_DIR", "${PROGNAME}.elf")
else:
    target_elf = env.BuildProgram()
AlwaysBuild(env.Alias("nobuild", target_elf))

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
