"""`pio pkg pack` of msf-pio, also offline.

PlatformIO validates library.json while packing, and checks `license` against the SPDX license
list it downloads; offline that stops the pack ("Could not load SPDX licenses for validation").
Here PlatformIO's own packer and manifest validation run unchanged, given the list from a file
(--spdx, SPDX's licenses.json) or, without one, reduced to the identifier msf-pio declares.

Usage: python scripts/pack_library.py [--out DIR] [--spdx licenses.json]
Prints the tarball's path, its size and its member count.
"""
import argparse
import json
import sys
import tarfile
from pathlib import Path

from platformio.package.manifest.schema import ManifestSchema
from platformio.package.pack import PackagePacker

REPO = Path(__file__).resolve().parents[1]


def pack(out: Path, spdx: Path | None = None) -> Path:
    if spdx:
        licenses = json.loads(spdx.read_text())
    else:
        declared = json.loads((REPO / "library.json").read_text())["license"]
        licenses = {"licenses": [{"licenseId": declared}]}
    ManifestSchema.load_spdx_licenses = staticmethod(lambda: licenses)
    out.mkdir(parents=True, exist_ok=True)
    return Path(PackagePacker(str(REPO)).pack(str(out)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path.cwd())
    ap.add_argument("--spdx", type=Path, default=None, help="SPDX licenses.json, if at hand")
    args = ap.parse_args()
    tarball = pack(args.out, args.spdx)
    with tarfile.open(tarball) as tar:
        members = tar.getnames()
    print(f"{tarball} {tarball.stat().st_size} B, {len(members)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
