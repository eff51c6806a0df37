"""`pio device monitor` on the msf-qemu boards: the port ``qemu://<env>`` runs the env's built
firmware in QEMU and is read as a board's serial port is (with the ``msf`` filter's verdicts).

PlatformIO loads a platform's monitor/filter_*.py before it opens the port: this one defines no
filter, it registers the ``qemu`` URL scheme with pyserial. msf-pio projects set
``monitor_port = qemu://<env>`` on their emulated envs.
"""
import os
import queue
import subprocess
import sys
import threading
import types

import serial
from serial.serialutil import PortNotOpenError, SerialBase, SerialException

PLATFORM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "msf_qemu_port"       # what pyserial imports the scheme's module from


class Serial(SerialBase):
    """QEMU's serial console as a pyserial port: reading it runs the firmware once."""

    def open(self):
        from platformio.project.config import ProjectConfig
        env = self.portstr.split("://", 1)[1].strip("/")
        config = ProjectConfig.get_instance()
        if not config.has_section("env:" + env):
            raise SerialException("qemu://%s: no [env:%s] in platformio.ini" % (env, env))
        elf = os.path.join(config.get("platformio", "build_dir"), env, "firmware.elf")
        if not os.path.isfile(elf):
            raise SerialException("%s is not built yet: run `pio run -e %s` (or `pio run -e %s -t "
                                  "upload`, which also runs it)" % (elf, env, env))
        try:
            from platformio.platform.factory import PlatformFactory
            command = PlatformFactory.new(PLATFORM_DIR).qemu_command(
                config.get("env:" + env, "board"), elf)
            self._proc = subprocess.Popen(command,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, bufsize=0)
        except OSError as exc:
            raise SerialException("cannot run QEMU: %s (scripts/setup.sh installs it)" % exc)
        self._env, self._chunks, self._pending = env, queue.Queue(), b""
        threading.Thread(target=self._pump, daemon=True).start()
        self.is_open = True

    def _pump(self):
        for chunk in iter(lambda: self._proc.stdout.read(4096), b""):
            self._chunks.put(chunk)
        status = self._proc.wait()
        self._chunks.put(("\r\n--- QEMU exited (status %d): the firmware's run is over. Ctrl+C "
                          "quits; `pio device monitor -e %s` runs it again.\r\n"
                          % (status, self._env)).encode())

    def _reconfigure_port(self):
        pass

    def _update_rts_state(self):
        pass

    def _update_dtr_state(self):
        pass

    @property
    def in_waiting(self):
        self._drain(block=False)
        return len(self._pending)

    def _drain(self, block):
        try:
            self._pending += self._chunks.get(block, self.timeout if block else None)
            while True:
                self._pending += self._chunks.get_nowait()
        except queue.Empty:
            pass

    def read(self, size=1):
        if not self.is_open:
            raise PortNotOpenError()
        if not self._pending:
            self._drain(block=True)
        data, self._pending = self._pending[:size], self._pending[size:]
        return bytes(data)

    def write(self, data):
        if not self.is_open:
            raise PortNotOpenError()
        try:
            self._proc.stdin.write(data)
        except OSError:                # QEMU is gone: nothing reads the keys any more
            pass
        return len(data)

    def reset_input_buffer(self):
        self._pending = b""

    def reset_output_buffer(self):
        pass

    def close(self):
        if self.is_open and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self.is_open = False


_package = types.ModuleType(PACKAGE)
_package.__path__ = []
_scheme = types.ModuleType(PACKAGE + ".protocol_qemu")
_scheme.Serial = Serial
sys.modules.setdefault(PACKAGE, _package)
sys.modules.setdefault(PACKAGE + ".protocol_qemu", _scheme)
if PACKAGE not in serial.protocol_handler_packages:
    serial.protocol_handler_packages.append(PACKAGE)
