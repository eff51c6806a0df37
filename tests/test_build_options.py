"""The custom_msf_* options of a PlatformIO env: calibration data for float models is a file or
folder of the project, its bytes decide regeneration, and a bad value is one line naming it."""
import json
from pathlib import Path

import numpy as np
import pytest

from msf_pio.errors import MsfError
from msf_pio.pio import PLATFORM_DIR
from msf_pio.pio.boards import board_facts
from msf_pio.pio.integration import _inputs_digest, read_options

FACTS = board_facts("nucleo_f767zi", lambda key, default=None: default)


def options(project: Path, **values):
    return read_options(lambda k, d: values.get(k, d), FACTS, project, "nucleo_f767zi")


def test_calibration_is_a_project_file_whose_bytes_regenerate(tmp_path):
    data = tmp_path / "cal.npy"
    np.save(data, np.zeros((2, 16, 16, 3), np.float32))
    opts = options(tmp_path, custom_msf_model="tiny", custom_msf_calibration="cal.npy",
                   custom_msf_input_range="0,255")
    assert opts.calibration == str(data) and opts.input_range == (0.0, 255.0)
    before = _inputs_digest(opts, FACTS)
    np.save(data, np.ones((2, 16, 16, 3), np.float32))
    assert _inputs_digest(opts, FACTS) != before


@pytest.mark.parametrize("option,value,words", [
    ("custom_msf_calibration", "missing.npz", "no such file or folder"),
    ("custom_msf_input_range", "255,0", "custom_msf_input_range"),
    ("custom_msf_measure", "always", "must be auto, yes or no"),
    ("custom_msf_code_budget", "lots", "must be a number of bytes"),
    ("custom_msf_code_budget", "-1", "must be"),
])
def test_bad_values_are_one_line_naming_the_option(tmp_path, option, value, words):
    with pytest.raises(MsfError) as err:
        options(tmp_path, custom_msf_model="tiny", **{option: value})
    text = str(err.value)
    assert "\n" not in text and option in text and words in text
    assert text.startswith("platformio.ini [env:nucleo_f767zi]")


@pytest.mark.parametrize("values,option,words", [
    ({"custom_msf_weights_section": '.w")));'}, "custom_msf_weights_section",
     "must be a linker section name"),
    ({"custom_msf_weights_section": ".qspi"}, "custom_msf_weights_size",
     "is required with custom_msf_weights_section on nucleo_f767zi"),
    ({"custom_msf_weights_section": ".qspi", "custom_msf_weights_size": "16 apples"},
     "custom_msf_weights_size", "must be a number of bytes"),
    ({"custom_msf_weights_size": "16MiB"}, "custom_msf_weights_size",
     "applies to custom_msf_weights_section only"),
])
def test_weights_section_options(tmp_path, values, option, words):
    # the section name reaches C text: only a plain section name; its memory's size is the
    # option's or the board's (NUCLEO-F767ZI has no external flash)
    with pytest.raises(MsfError) as err:
        options(tmp_path, custom_msf_model="tiny", **values)
    text = str(err.value)
    assert "\n" not in text and option in text and words in text
    opts = options(tmp_path, custom_msf_model="tiny", custom_msf_weights_section=".qspi",
                   custom_msf_weights_size="16MiB")
    assert (opts.weights_section, opts.weights_size) == (".qspi", 16 << 20)
    manifest = json.loads((Path(PLATFORM_DIR) / "boards" / "qemu_f767zi.json").read_text())
    emulated = board_facts("qemu_f767zi", lambda key, default=None: manifest.get(
        key.split(".")[0], {}).get(key.split(".")[1], default))   # its 16 MB at 0x60000000
    opts = read_options(lambda k, d: {"custom_msf_model": "tiny",
                                      "custom_msf_weights_section": "ExtFlashSection"}.get(k, d),
                        emulated, tmp_path, "qemu_f767zi")
    assert (opts.weights_section, opts.weights_size) == ("ExtFlashSection", 16 << 20)
    disco = board_facts("disco_f746ng", lambda key, default=None: default)   # boards.yaml
    opts = read_options(lambda k, d: {"custom_msf_model": "tiny",
                                      "custom_msf_weights_section": ".qspi"}.get(k, d),
                        disco, tmp_path, "disco_f746ng")
    assert opts.weights_size == 16 << 20


def test_code_budget_option():
    """custom_msf_code_budget: bytes of code for the specialised kernels, 0 (none) or inf; the
    default leaves the choice to kernel_counts.DEFAULT_BUDGET; a change regenerates."""
    import math
    assert options(Path("."), custom_msf_model="tiny").code_budget is None
    for text, value in (("0", 0), ("32KiB", 32768), ("40000", 40000), ("inf", math.inf)):
        opts = options(Path("."), custom_msf_model="tiny", custom_msf_code_budget=text)
        assert opts.code_budget == value
    assert _inputs_digest(options(Path("."), custom_msf_model="tiny",
                                  custom_msf_code_budget="0"), FACTS) != \
        _inputs_digest(options(Path("."), custom_msf_model="tiny"), FACTS)
