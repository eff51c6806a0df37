"""Issue 8's streamed-input figure on an emulated board: mcunet-vww-5fps with its input pulled
row by row from the golden vector (custom_msf_input = stream) and its output streamed, at
F <= 1.3, runs bit-exact on qemu_f767zi in at most 20,000 B of activation RAM (the arena holds
the input rows; nothing else is a buffer), the painted arena equal to the prediction, and
`pio test` passes there and on qemu_esp32c3 (every input row pulled once, in order)."""
import json

from msf_pio.pio.project import make_project, pio, result_lines
from tests.test_pio_models import LINE, core, reference_crc  # noqa: F401  (core: a fixture)


def test_mcunet_vww_streamed_in_20_kb_on_qemu_f767zi(core, tmp_path):  # noqa: F811
    project = make_project(tmp_path / "demo", model="mcunet-vww-5fps", max_overhead="1.3",
                           input="stream", output="stream")
    code, out = pio(core, project, "run", "-e", "qemu_f767zi", "-t", "upload")
    assert code == 0, out[-3000:]
    lines = result_lines(out)
    assert len(lines) == 1, out[-2000:]
    print(lines[0])
    hz, arena, arena_pred, crc, crc_ref, status = LINE.search(lines[0]).groups()
    assert status == "ok" and crc == crc_ref == reference_crc("mcunet-vww-5fps")
    summary = json.loads((project / ".pio" / "build" / "qemu_f767zi" / "msf_generated" /
                          "stamp.json").read_text())["summary"]
    assert int(arena) == int(arena_pred) == summary["peak_ram_bytes"] <= 20_000
    assert summary["plan"] == "p1:1.3"
    code, out = pio(core, project, "test", "--without-uploading", "-e", "qemu_f767zi",
                    "-e", "qemu_esp32c3")
    assert code == 0 and "8 test cases: 8 succeeded" in out, out[-3000:]
