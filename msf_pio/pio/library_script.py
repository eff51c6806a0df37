"""PlatformIO library script of msf-pio (library.json `build.extraScript`).

PlatformIO runs it when it constructs msf-pio's library builder, before any source is
collected (and never on `pio run -t clean`). It checks PlatformIO's Python, installs msf-pio's
Python dependencies there on the first build, then reads the env's custom_msf_* options and
generates the model's C into the build folder (msf_pio/pio/integration.py). A builder may
construct the library more than once in a build (platform-espressif32's espidf builder does):
the model is generated once and compiled by the library builder PlatformIO really builds.
"""
import inspect
import os
import sys

Import("env")  # noqa: F821  (SCons injects Import)
pio_lib_builder = None  # the library builder running this script, where PlatformIO exports it
try:
    Import("pio_lib_builder")  # noqa: F821
except Exception:  # an older PlatformIO: the model is compiled right away
    pass

_HERE = os.path.dirname(os.path.abspath(inspect.getframeinfo(inspect.currentframe()).filename))
_ROOT = os.path.dirname(os.path.dirname(_HERE))


def _stop(line):
    print(line)
    env.Exit(1)  # noqa: F821


if sys.version_info < (3, 10):
    _stop("msf-pio: error: PlatformIO runs Python %d.%d (%s); msf-pio needs Python 3.10 or newer"
          % (sys.version_info[0], sys.version_info[1], sys.executable))
else:
    if _ROOT not in sys.path:
        sys.path.insert(0, _ROOT)
    from msf_pio.pio import dependencies

    modules = dict(dependencies.REQUIRED)
    model = str(env.GetProjectOption("custom_msf_model", "")).strip()  # noqa: F821
    modules.update(dependencies.FOR_ONNX if model.endswith(".onnx") else
                   dependencies.FOR_TFLITE if model.endswith(".tflite") else {})
    error = dependencies.ensure(env.subst("$PYTHONEXE"), _ROOT, modules, print)  # noqa: F821
    if error:
        _stop(error)
    else:
        from msf_pio.pio.integration import configure
        configure(env, pio_lib_builder)  # noqa: F821
