"""Calibration of float models from real data (.npy/.npz files or a folder), an input range for
random calibration, and the one-line warning when random images stand in for real data."""
import subprocess
import sys

import numpy as np
import pytest

from msf_pio.errors import MsfError
from msf_pio.model import load_model
from msf_pio.model.calibration import load_calibration, parse_input_range
from msf_pio.verify import quantized_model

from .test_onnx_import import residual_net

SHAPE = (16, 16, 3)


def _images(n, lo=0.0, hi=1.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, (n, *SHAPE)).astype(np.float32)


def test_reads_npy_npz_folders_and_nchw(tmp_path):
    np.save(tmp_path / "one.npy", _images(1)[0])                            # HWC image
    np.savez(tmp_path / "batch.npz", a=_images(3), b=_images(2).transpose(0, 3, 1, 2))   # NCHW
    assert load_calibration(tmp_path / "one.npy", SHAPE).shape == (1, *SHAPE)
    assert load_calibration(tmp_path / "batch.npz", SHAPE).shape == (5, *SHAPE)
    assert load_calibration(tmp_path, SHAPE).shape == (6, *SHAPE)


@pytest.mark.parametrize("make,fragment", [
    (lambda d: np.save(d / "x.npy", np.zeros((4, 4, 3))), "must be images [16, 16, 3]"),
    (lambda d: np.save(d / "x.npy", np.full(SHAPE, np.nan)), "NaN or infinity"),
    (lambda d: (d / "x.npy").write_bytes(b"garbage"), "cannot read calibration arrays"),
    (lambda d: None, "no .npy or .npz calibration arrays"),
], ids=["shape", "nan", "garbage", "empty"])
def test_bad_calibration_data_is_a_one_line_error(tmp_path, make, fragment):
    make(tmp_path)
    with pytest.raises(MsfError, match="^" + str(tmp_path)) as exc:
        load_calibration(tmp_path, SHAPE)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_input_range_is_parsed():
    assert parse_input_range("0,1") == (0.0, 1.0)
    for bad in ("1,0", "x", "0,1,2", "0,inf"):
        with pytest.raises(MsfError, match="--input-range"):
            parse_input_range(bad)


def test_real_data_sets_the_input_scale_and_silences_the_warning(tmp_path, capsys):
    net = residual_net(tmp_path)
    np.save(tmp_path / "data.npy", _images(8, 0.0, 1.0))
    model = quantized_model(str(net), str(tmp_path / "data.npy"))
    assert model.q_input.zero_point == -128 and model.q_input.scale == pytest.approx(1 / 255, 0.01)
    assert "warning" not in capsys.readouterr().err
    ranged = quantized_model(str(net), input_range=(0.0, 1.0))
    assert ranged.q_input.zero_point == -128
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "random calibration images in [0, 1]" in err
    assert str(net) in err


def test_cli_calibration_option(tmp_path):
    net = residual_net(tmp_path)
    (tmp_path / "calib").mkdir()
    for i in range(3):
        np.save(tmp_path / "calib" / f"{i}.npy", _images(1, seed=i)[0])
    run = [sys.executable, "-m", "msf_pio.cli", "export", str(net), "--out"]
    proc = subprocess.run([*run, str(tmp_path / "a.tflite"), "--calibration",
                           str(tmp_path / "calib")], capture_output=True, text=True)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    assert load_model(str(tmp_path / "a.tflite")).q_input.zero_point == -128
    proc = subprocess.run([*run, str(tmp_path / "b.tflite")], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr.startswith("msf-pio: warning: ")
    proc = subprocess.run([*run, str(tmp_path / "c.tflite"), "--input-range", "1,0"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
