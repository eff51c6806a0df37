"""PlatformIO pre script of msf-pio: `extra_scripts = pre:<path to this file>`.

Runs before the library finder: reads the env's custom_msf_* options, generates the model's
C into the build directory as the library `msf_model`, and prints the plan summary. msf_pio is
imported from the tree this file lives in, so PlatformIO's Python needs only msf-pio's
dependencies (numpy, networkx, pyyaml; onnx for .onnx models).
"""
import inspect
import os
import sys

Import("env")  # noqa: F821  (SCons injects Import)

_HERE = os.path.dirname(os.path.abspath(inspect.getframeinfo(inspect.currentframe()).filename))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

try:
    from msf_pio.pio.integration import configure
except ImportError as exc:
    print("msf-pio: error: PlatformIO's Python lacks a dependency of msf-pio (%s); install it "
          "with: %s -m pip install numpy networkx pyyaml onnx" % (exc, sys.executable))
    env.Exit(1)  # noqa: F821
else:
    configure(env)  # noqa: F821
