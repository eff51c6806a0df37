"""`pio test` runner of msf-pio's harness (the demo's and init's projects): run the firmware
(QEMU on msf-qemu boards, the board's serial port otherwise) and turn its MSF lines into test
cases.

Cases: `inference` (the result line: status=ok means the output CRC equals the host
reference and the measured arena equals the prediction) and the firmware's own test lines
(test_bitexact, test_repeatable, test_ram). A missing line is a failed case.

On a real board (`pio test -e nucleo_f767zi`, or `--test-port` at any serial port) the firmware
repeats its report every few seconds, so a port opened after the upload still reads it: each
case counts once, and the run ends when every case has been seen.
"""

import os
import re

from platformio.public import TestCase, TestRunnerBase, TestStatus
from platformio.test.runners.readers.native import NativeTestOutputReader

RESULT_RE = re.compile(r"^MSF model=\S+ .*\bstatus=(?P<status>\w+)$")
TEST_RE = re.compile(r"^MSF (?P<name>test_[a-z_]+) (?P<fields>.*)\bstatus=(?P<status>\w+)$")
EXPECTED = ("inference", "test_bitexact", "test_repeatable", "test_ram")


class CustomTestRunner(TestRunnerBase):
    def stage_testing(self):
        if self.options.without_testing:
            return None
        if self.platform.name != "msf-qemu":
            return super().stage_testing()        # a real board: read its serial port
        env = f"env:{self.test_suite.env_name}"
        elf = os.path.join(self.project_config.get("platformio", "build_dir"),
                           self.test_suite.env_name, "firmware.elf")
        reader = NativeTestOutputReader(self)
        reader.get_testing_command = lambda: self.platform.run_command(
            self.project_config.get(env, "board"), elf,
            timeout=self.project_config.get(env, "custom_qemu_timeout", 300))
        try:
            return reader.begin()
        finally:
            self._missing_cases_fail()

    def _missing_cases_fail(self):
        seen = {case.name for case in self.test_suite.cases}
        for name in EXPECTED:
            if name not in seen:
                self.test_suite.add_case(TestCase(name, TestStatus.FAILED,
                                                  message="no result line"))

    def on_testing_line_output(self, line):
        super().on_testing_line_output(line)
        line = line.strip()
        result, test = RESULT_RE.match(line), TEST_RE.match(line)
        match = result or test
        if not match:
            return
        name = "inference" if result else test["name"]
        seen = {case.name for case in self.test_suite.cases}
        if name in seen:
            return
        passed = match["status"] == "ok"
        self.test_suite.add_case(TestCase(
            name, TestStatus.PASSED if passed else TestStatus.FAILED,
            message=None if passed else line, stdout=line))
        if seen | {name} >= set(EXPECTED):
            self.test_suite.on_finish()
