"""PlatformIO device-monitor filter ``msf`` of msf-pio.

The msf-qemu platform ships it (PlatformIO loads a platform's monitor/ filters) and
`msf-pio init` writes it into a new project's monitor/; enable it with ``monitor_filters = msf``
in platformio.ini. Passes the serial text through and writes, under each MSF result line, a
verdict such as ``  -> RAM 7788/7788 B ok (+412 B stack), 1996.8 ms, crc ok``, checked against
<build_dir>/<env>/msf_generated/plan.json when the build left one. Works without msf_pio
importable.
"""
import json
import os
import re

from platformio.public import DeviceMonitorFilterBase

try:
    from msf_pio.pio.monitor import parse_line, verdict_line
except ImportError:  # PlatformIO's Python without msf_pio: the same checks, built in
    _INTS = ("hz", "cycles", "us", "arena", "arena_pred", "stack", "ram", "ram_pred", "macs")
    _KEYS = ("model", "plan", "board", "clock", *_INTS, "crc", "crc_ref", "status")

    def parse_line(line):
        """The result record of a line, or None."""
        start = line.find("MSF model=")
        if start < 0:
            return None
        tokens = [t.partition("=") for t in line[start + 4:].split()]
        rec = {k: v for k, _, v in tokens}
        if tuple(k for k, _, _ in tokens) != _KEYS or not all(rec.values()):
            return None
        measured = ("arena", "ram")          # '-': a release build, not painted
        if not all(rec[k].isascii() and rec[k].isdigit() for k in _INTS
                   if not (k in measured and rec[k] == "-")):
            return None
        if not all(re.fullmatch(r"0x[0-9a-fA-F]{8}", rec[k]) for k in ("crc", "crc_ref")):
            return None
        if rec["clock"] not in ("dwt", "systick", "mcycle", "ccount", "esp"):
            return None
        if rec["status"] not in ("ok", "mismatch", "fail"):
            return None
        rec.update({k: None if rec[k] == "-" else int(rec[k]) for k in _INTS})
        rec.update({k: rec[k].lower() for k in ("crc", "crc_ref")})
        return rec

    def verdict_line(rec, plan=None):
        """The verdict under a result line."""
        plan = plan or {}
        ref = (plan.get("reference_crc32") or rec["crc"]).lower()
        crc = "ok" if rec["crc"] == rec["crc_ref"] == ref else "MISMATCH"
        if rec["arena"] is None:
            ram = (f"RAM not measured (release build; pio test measures it), predicted "
                   f"{rec['arena_pred']} B (+{rec['stack']} B stack)")
        else:
            ram = (f"RAM {rec['arena']}/{rec['arena_pred']} B "
                   f"{'ok' if rec['arena'] == rec['arena_pred'] else 'MISMATCH'} "
                   f"(+{rec['stack']} B stack)")
        parts = [ram,
                 f"{rec['us'] / 1000:.1f} ms", f"crc {crc}"]
        if plan.get("macs") is not None and rec["macs"] != plan["macs"]:
            parts.append("macs MISMATCH")
        if rec["status"] != "ok":
            parts.append(f"board status={rec['status']}")
        return "  -> " + ", ".join(parts)


class MsfResults(DeviceMonitorFilterBase):
    """Appends a verdict line after every complete MSF result line."""

    NAME = "msf"
    MAX_LINE = 1024  # a newline-less stream (noise) must not grow the buffer forever

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._line = ""

    def _plan(self):
        """The build's plan.json for this env, if there is a readable one."""
        if not self.environment:
            return None
        path = os.path.join(self.config.get("platformio", "build_dir"), self.environment,
                            "msf_generated", "plan.json")
        try:
            with open(path, encoding="utf-8") as f:
                plan = json.load(f)
        except (OSError, ValueError):
            return None
        ok = isinstance(plan, dict) and isinstance(plan.get("reference_crc32", ""), str)
        return plan if ok else None

    def rx(self, text):
        out = []
        *complete, rest = text.split("\n")
        for part in complete:
            line, self._line = self._line + part, ""
            out.append(part + "\n")
            rec = parse_line(line.rstrip("\r"))
            if rec is not None:
                eol = "\r\n" if line.endswith("\r") else "\n"
                out.append(verdict_line(rec, self._plan()) + eol)
        out.append(rest)
        self._line = (self._line + rest)[-self.MAX_LINE:]
        return "".join(out)
