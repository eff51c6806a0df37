"""The custom_msf_* options of a PlatformIO env: calibration data for float models is a file or
folder of the project, its bytes decide regeneration, and a bad value is one line naming it."""
from pathlib import Path

import numpy as np
import pytest

from msf_pio.errors import MsfError
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
])
def test_bad_values_are_one_line_naming_the_option(tmp_path, option, value, words):
    with pytest.raises(MsfError) as err:
        options(tmp_path, custom_msf_model="tiny", **{option: value})
    text = str(err.value)
    assert "\n" not in text and option in text and words in text
    assert text.startswith("platformio.ini [env:nucleo_f767zi]")
