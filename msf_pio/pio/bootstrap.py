"""Offline PlatformIO bootstrap: install the core package ``tool-scons`` from PyPI's SCons.

PlatformIO 6.2 runs every build through ``<packages>/tool-scons/scons.py`` and, when the
package is missing, downloads it from its registry (unreachable in CI). It finds the package
through ``ToolPackageManager.get_package(owner=platformio, name=tool-scons, ~4.41101.0)``:
a directory under the packages dir whose ``.piopm`` says owner ``platformio`` and whose
``package.json`` version satisfies the requirement. SCons 4.11.1 *is* 4.41101.0 in
PlatformIO's numbering, so the pip-installed SCons is copied there unchanged.

Usage: ``python -m msf_pio.pio.bootstrap [--core-dir DIR]`` (idempotent). Nothing global is
changed; for offline runs also export (see ``offline_env``)::

    PLATFORMIO_CORE_DIR=<dir>                  # if not ~/.platformio
    PLATFORMIO_DISABLE_UPGRADE_CHECK=true      # no PyPI/registry upgrade probe after commands
    PLATFORMIO_SETTING_ENABLE_TELEMETRY=No     # no HTTP posts to the telemetry collector
"""

import argparse
import json
import os
import shutil
import sys

PACKAGE = "tool-scons"
VERSION = "4.41101.0"  # PlatformIO's encoding of SCons 4.11.1 (see platformio/dependencies.py)
SCONS_PY = '''"""Entry point PlatformIO runs (platformio/platform/_run.py); written by msf_pio."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "scons-local"))
import SCons.Script  # noqa: E402

SCons.Script.main()
'''


def core_dir(explicit=None):
    """PlatformIO's core dir as PlatformIO resolves it by default."""
    return os.path.abspath(
        explicit or os.environ.get("PLATFORMIO_CORE_DIR") or os.path.expanduser("~/.platformio")
    )


def packages_dir(core):
    return os.environ.get("PLATFORMIO_PACKAGES_DIR") or os.path.join(core, "packages")


def offline_env(core=None, base=None):
    """A copy of ``base`` (default os.environ) set up for an offline PlatformIO run."""
    env = dict(os.environ if base is None else base)
    env.update(
        PLATFORMIO_CORE_DIR=core_dir(core),
        PLATFORMIO_DISABLE_UPGRADE_CHECK="true",
        PLATFORMIO_SETTING_ENABLE_TELEMETRY="No",
    )
    return env


def _scons_source():
    import SCons  # pip-installed; a dependency of platformio

    version = getattr(SCons, "__version__", "")
    if not version.startswith("4.11."):
        raise SystemExit(f"need SCons 4.11.x (PlatformIO 6.2 wants {VERSION}), found {version}")
    return os.path.dirname(os.path.abspath(SCons.__file__)), version


def _is_current(pkg_dir, scons_version):
    try:
        with open(os.path.join(pkg_dir, "package.json"), encoding="utf8") as fp:
            manifest = json.load(fp)
        with open(os.path.join(pkg_dir, ".piopm"), encoding="utf8") as fp:
            meta = json.load(fp)
    except (OSError, ValueError):
        return False
    return (
        manifest.get("version") == VERSION
        and manifest.get("msf_scons_version") == scons_version
        and (meta.get("spec") or {}).get("owner") == "platformio"
        and os.path.isfile(os.path.join(pkg_dir, "scons.py"))
    )


def install_tool_scons(core=None, force=False, log=print):
    """Lay out ``tool-scons`` under the packages dir; return its path."""
    src, scons_version = _scons_source()
    pkg_dir = os.path.join(packages_dir(core_dir(core)), PACKAGE)
    if not force and _is_current(pkg_dir, scons_version):
        log(f"{PACKAGE} {VERSION} already in {pkg_dir}")
        return pkg_dir
    tmp = pkg_dir + ".msf-tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    # A copy, not a path into site-packages: PlatformIO may run under another interpreter.
    # The 20 MB of DocBook stylesheets serve only SCons' docbook tool, which firmware never uses.
    shutil.copytree(src, os.path.join(tmp, "scons-local", "SCons"),
                    ignore=shutil.ignore_patterns("__pycache__", "docbook-xsl-*"))
    with open(os.path.join(tmp, "scons.py"), "w", encoding="utf8") as fp:
        fp.write(SCONS_PY)
    manifest = {"name": PACKAGE, "version": VERSION, "description": "SCons "
                + scons_version + " from PyPI (offline bootstrap by msf-pio)",
                "msf_scons_version": scons_version}
    with open(os.path.join(tmp, "package.json"), "w", encoding="utf8") as fp:
        json.dump(manifest, fp, indent=2)
    # .piopm is what PackageItem.load_meta reads; owner must be "platformio".
    meta = {"type": "tool", "name": PACKAGE, "version": VERSION,
            "spec": {"owner": "platformio", "id": None, "name": PACKAGE,
                     "requirements": "~" + VERSION, "uri": None}}
    with open(os.path.join(tmp, ".piopm"), "w", encoding="utf8") as fp:
        json.dump(meta, fp)
    shutil.rmtree(pkg_dir, ignore_errors=True)
    os.makedirs(os.path.dirname(pkg_dir), exist_ok=True)
    os.replace(tmp, pkg_dir)
    log(f"installed {PACKAGE} {VERSION} (SCons {scons_version} from {src}) into {pkg_dir}")
    return pkg_dir


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m msf_pio.pio.bootstrap",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--core-dir", help="PlatformIO core dir (default: $PLATFORMIO_CORE_DIR "
                        "or ~/.platformio)")
    parser.add_argument("--force", action="store_true", help="reinstall even if current")
    args = parser.parse_args(argv)
    install_tool_scons(args.core_dir, force=args.force)
    print("for offline runs export: PLATFORMIO_CORE_DIR=%s PLATFORMIO_DISABLE_UPGRADE_CHECK=true "
          "PLATFORMIO_SETTING_ENABLE_TELEMETRY=No" % core_dir(args.core_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
