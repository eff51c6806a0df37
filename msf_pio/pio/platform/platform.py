"""msf-qemu: PlatformIO platform whose boards are QEMU machines (see builder/main.py)."""

import os
import shlex
import sys

from platformio.public import PlatformBase

DEFAULT_TIMEOUT = 60  # seconds; project option custom_qemu_timeout overrides
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builder", "qemu_run.py")


class MsfqemuPlatform(PlatformBase):
    def is_embedded(self):
        # No "uploader" package exists (QEMU comes from apt), yet these are embedded targets:
        # `pio test` must build firmware and not run the ELF on the host.
        return True

    def qemu_command(self, board_id, elf_path):
        """The QEMU argv that runs ``elf_path`` on ``board_id`` (from its "emulator" section)."""
        emu = self.board_config(board_id).get("emulator")
        return ([emu["system"]] + list(emu["args"])
                + ["-display", "none", "-monitor", "none", "-serial", "stdio",
                   "-kernel", elf_path])

    def run_command(self, board_id, elf_path, timeout=DEFAULT_TIMEOUT, python=None):
        """qemu_run.py wrapping ``qemu_command``: fails on timeout or a missing end line."""
        return ([python or sys.executable, RUNNER, "--timeout", str(timeout), "--"]
                + self.qemu_command(board_id, elf_path))

    def run_command_line(self, *args, **kwargs):
        return " ".join(shlex.quote(a) for a in self.run_command(*args, **kwargs))
