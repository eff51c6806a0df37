"""msf-pio's Python dependencies in the Python that runs PlatformIO (the PlatformIO IDE keeps
its own virtual environment): found, or installed once with pip at the versions of
constraints.txt, or one line naming the command to run. Standard library only: it runs before
any of them can be imported."""
import importlib
import importlib.util
import os
import re
import subprocess

REQUIRED = {"numpy": "numpy", "networkx": "networkx", "yaml": "pyyaml"}  # module: distribution
FOR_ONNX = {"onnx": "onnx"}
FOR_TFLITE = {"flatbuffers": "flatbuffers", "tflite_micro": "tflite-micro"}  # the schema


def missing(modules):
    """Distributions whose module cannot be imported."""
    importlib.invalidate_caches()
    return [dist for module, dist in modules.items() if importlib.util.find_spec(module) is None]


def pinned(dists, root):
    """`name==version` from root/constraints.txt where it names the distribution."""
    versions = {}
    path = os.path.join(root, "constraints.txt")
    if os.path.isfile(path):
        with open(path, encoding="utf8") as fp:
            for line in fp:
                m = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;#]+)", line)
                if m:
                    versions[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return ["%s==%s" % (d, versions[d]) if d in versions else d for d in dists]


def ensure(python, root, modules, log):
    """None when every module imports (after installing what was missing), else the one-line
    error to print."""
    need = missing(modules)
    if not need:
        return None
    specs = pinned(need, root)
    log("msf-pio: installing %s into PlatformIO's Python (%s), once" % (", ".join(specs), python))
    for attempt in (specs, need):   # the pinned versions, else what pip finds for this Python
        proc = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               "--retries", "1", "--timeout", "20", *attempt],
                              capture_output=True, text=True)
        if proc.returncode == 0 and not missing(modules):
            return None
        if "No matching distribution" not in proc.stderr:
            break
    reason = (proc.stderr.strip().splitlines() or ["pip failed"])[-1][:160]
    return ("msf-pio: error: PlatformIO's Python lacks %s and pip could not install them (%s); "
            "run: %s -m pip install %s" % (", ".join(need), reason, python, " ".join(specs)))
