"""`pio test` runner for msf-qemu boards: run the firmware in QEMU, one case per result line.

Every `MSF <name> ... status=<s>` line is a test case; `selftest` and `hello` must appear.
The platform's run command fails a run that times out or lacks the `MSF exit=<n>` line.
"""

import os
import re

from platformio.public import TestCase, TestRunnerBase, TestStatus
from platformio.test.runners.readers.native import NativeTestOutputReader

RESULT_RE = re.compile(r"^MSF (?P<name>[a-z_]+) (?P<fields>.*\bstatus=(?P<status>\w+).*)$")
HELLO_RE = re.compile(r"\bcycles=[1-9]\d* stack=[1-9]\d* status=ok$")
EXPECTED = ("selftest", "hello")


class CustomTestRunner(TestRunnerBase):
    def stage_testing(self):
        if self.options.without_testing:
            return None
        env = f"env:{self.test_suite.env_name}"
        elf = os.path.join(self.project_config.get("platformio", "build_dir"),
                           self.test_suite.env_name, "firmware.elf")
        reader = NativeTestOutputReader(self)
        reader.get_testing_command = lambda: self.platform.run_command(
            self.project_config.get(env, "board"), elf,
            timeout=self.project_config.get(env, "custom_qemu_timeout", 60))
        try:
            return reader.begin()
        finally:
            seen = {case.name for case in self.test_suite.cases}
            for name in EXPECTED:
                if name not in seen:
                    self.test_suite.add_case(TestCase(name, TestStatus.FAILED,
                                                      message="no result line"))

    def on_testing_line_output(self, line):
        super().on_testing_line_output(line)
        match = RESULT_RE.match(line.strip())
        if not match:
            return
        name = match["name"]
        passed = match["status"] == "ok" and (name != "hello" or HELLO_RE.search(line.strip()))
        self.test_suite.add_case(TestCase(
            name, TestStatus.PASSED if passed else TestStatus.FAILED,
            message=None if passed else match["fields"], stdout=line))
