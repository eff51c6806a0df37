"""Run firmware in QEMU and turn the run into an honest exit status.

    python qemu_run.py [--timeout S] -- qemu-system-arm -M ... -kernel firmware.elf

Streams the guest's serial output. The status is QEMU's (the firmware's semihosting exit
status) only if the firmware printed its end-of-run line ``MSF exit=<n>``; a timeout (124) or
a run without that line (1) fails, because a QEMU that is killed or stops early exits 0.
Standalone on purpose: PlatformIO runs it with its own Python, without msf_pio importable.
"""

import argparse
import re
import subprocess
import sys
import threading

END_RE = re.compile(r"^MSF exit=(-?\d+)\s*$")
TIMEOUT_STATUS = 124


def run(cmd, timeout, out=sys.stdout):
    """Run ``cmd``; echo its output to ``out``; return (status, lines)."""
    lines, ended = [], []
    # Unbuffered pipe: read() returns what QEMU wrote so far, so lines stream live.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, bufsize=0)

    def pump():
        buf = b""
        for chunk in iter(lambda: proc.stdout.read(4096), b""):
            buf += chunk
            *complete, buf = buf.split(b"\n")
            for raw in complete:
                line = raw.decode("ascii", "replace").rstrip("\r")
                lines.append(line)
                out.write(line + "\n")
                out.flush()
                if END_RE.match(line):
                    ended.append(line)
        if buf:
            lines.append(buf.decode("ascii", "replace"))
            out.write(lines[-1] + "\n")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        reader.join(2)
        out.write(f"qemu_run: timeout after {timeout} s, killed QEMU\n")
        return TIMEOUT_STATUS, lines
    except KeyboardInterrupt:
        proc.kill()
        raise
    reader.join(5)
    if not ended:
        out.write(f"qemu_run: QEMU exited {proc.returncode} without the end-of-run line "
                  "'MSF exit=<n>'\n")
        return proc.returncode or 1, lines
    return proc.returncode, lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the QEMU command")
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("no QEMU command given")
    try:
        status, _ = run(cmd, args.timeout)
    except FileNotFoundError as exc:
        sys.stderr.write(f"qemu_run: {exc.filename} not found; install Debian's qemu-system-arm "
                         "/ qemu-system-misc\n")
        return 127
    return status


if __name__ == "__main__":
    sys.exit(main())
