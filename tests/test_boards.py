"""Board facts: the part's real flash and RAM win over a wrong manifest, and the build budgets
everything the firmware holds (arena, I/O buffers, stack, the framework's own RAM), so a plan
the board cannot hold stops with one line naming what fits instead of failing at link time."""
import importlib.metadata
import math
import subprocess
import sys
from dataclasses import replace

import pytest

from msf_pio.errors import MsfError
from msf_pio.pio.boards import BoardFacts, app_partition, board_facts
from msf_pio.pio.integration import Options, generate_library


def manifest(**values):
    return lambda key, default=None: values.get(key, default)


def options(model, output="stream", ram_limit=None, objective="min_ram"):
    return Options(model, objective, math.inf, ram_limit, "exact", output)


def test_part_figures_win_over_a_wrong_manifest():
    # PlatformIO's hifive1-revb manifest says 16 MB of flash; the Rev B has 4 MB
    facts = board_facts("hifive1-revb", manifest(**{"upload.maximum_size": 16777216,
                                                   "upload.maximum_ram_size": 16384}))
    assert facts.flash == 4 * 1024 * 1024 - 64 * 1024     # less the bootloader's 64 KB
    assert facts.ram == 16384


def test_a_narrowed_manifest_wins_over_the_part():
    # board_upload.maximum_ram_size = 131072: e.g. relinked for an STM32F405 stand-in
    facts = board_facts("nucleo_f412zg", manifest(**{"upload.maximum_ram_size": 131072}))
    assert facts.ram == 131072 and facts.flash == 1024 * 1024


def test_unknown_board_takes_the_manifest():
    facts = board_facts("my_board", manifest(**{"upload.maximum_ram_size": 65536,
                                               "upload.maximum_size": 262144,
                                               "build.stack_size": 2048}))
    assert (facts.ram, facts.flash, facts.stack) == (65536, 262144, 2048)


def test_auto_budget_counts_stack_framework_and_io(tmp_path):
    facts = board_facts("hifive1-revb", manifest())
    _, summary, _ = generate_library(options("mbv2-w0.35-paper"), tmp_path, facts, 0)
    # the paper ran this model in 16 KB; the arena is the plan's, the rest is the board's
    assert summary["ram_total_bytes"] == (summary["peak_ram_bytes"] + facts.stack
                                          + facts.framework_ram)
    assert summary["ram_total_bytes"] <= facts.ram
    assert summary["ram_limit"] == facts.ram - facts.stack - facts.framework_ram


def test_model_too_big_for_the_board_names_what_fits(tmp_path):
    facts = board_facts("hifive1-revb", manifest())
    with pytest.raises(MsfError) as err:
        generate_library(options("mn2-320k-paper"), tmp_path, facts, 0)
    text = str(err.value)
    assert "\n" not in text and "hifive1-revb" in text
    assert f"no plan fits in {facts.ram_budget(0)} B" in text
    assert "least-RAM plan" in text


def test_explicit_limit_above_what_the_board_holds_is_refused(tmp_path):
    # a P2 budget of 64 kB on a 16 KB board: the plan's arena fits the option, not the board
    facts = board_facts("hifive1-revb", manifest())
    with pytest.raises(MsfError) as err:
        generate_library(options("mcunet-vww-5fps", output="buffer", ram_limit=64000,
                                 objective="min_macs"),
                         tmp_path, facts, 0)
    text = str(err.value)
    assert "I/O buffers 2 B" in text                      # the 2-class output buffer
    assert f"at most {facts.ram_budget(2)} B" in text
    assert f"stack {facts.stack} B" in text and f"framework {facts.framework_ram} B" in text


def test_weights_beyond_the_flash_stop_the_build(tmp_path):
    facts = BoardFacts("small", flash=100_000, ram=1 << 20, framework_ram=0, stack=0)
    with pytest.raises(MsfError, match=r"the model needs \d+ B of flash \(constant data \d+ B, "
                                       r"code about \d+ B\), small has 100000 B \(custom_msf_weights_section "
                                       r"places the weights in external memory\)$"):
        generate_library(options("mbv2-w0.35-paper"), tmp_path, facts, 0)


def test_weights_in_external_memory_count_against_it(tmp_path):
    # custom_msf_weights_section: the weights leave the internal flash for the memory the
    # section is mapped to, and are checked against that memory's size instead; the internal
    # flash keeps the tables and the code (codegen/flash.py)
    facts = BoardFacts("small", flash=64 << 10, ram=1 << 20, framework_ram=0, stack=0)
    external = replace(options("mlperf-tiny-ad"), weights_section=".qspi_weights",
                       weights_size=1 << 20)
    _, summary, _ = generate_library(external, tmp_path, facts, 0)
    need = summary["weight_bytes"]
    assert need > facts.flash
    source = (tmp_path / "msf_generated" / "msf_model" / "src" / "msf_model.c").read_text()
    assert '#define MSF_WEIGHTS __attribute__((section(".qspi_weights")))' in source
    with pytest.raises(MsfError, match=rf"the weights need {need} B, the memory of section "
                                       rf"\.qspi_weights has {need - 1} B"):
        generate_library(replace(external, weights_size=need - 1), tmp_path, facts, 0)
    internal = summary["flash_data_bytes"] - summary["flash_weights_bytes"]
    with pytest.raises(MsfError, match=rf"the model needs \d+ B of flash \(constant data "
                                       rf"{internal} B, code about \d+ B\), small has 4096 B$"):
        generate_library(external, tmp_path, replace(facts, flash=4096), 0)


# ESP-IDF's partition tables (name, type, subtype, offset, size, flags): its default single-app
# table gives the app a 1 MB factory partition, whatever the flash size
SINGLE_APP = """# Name, Type, SubType, Offset, Size, Flags
nvs,      data, nvs,     ,        0x6000,
phy_init, data, phy,     ,        0x1000,
factory,  app,  factory, ,        1M,
"""
OTA = """nvs, data, nvs, 0x9000, 0x4000,
otadata, data, ota, , 0x2000,
ota_0, app, ota_0, , 0x1C0000,
ota_1, app, ota_1, , 1792K,
"""


def test_app_partition_is_the_one_platform_espressif32_flashes():
    assert app_partition(SINGLE_APP) == ("factory", 1024 * 1024)
    assert app_partition(OTA) == ("ota_0", 0x1C0000)
    assert app_partition(OTA, name="ota_1") == ("ota_1", 1792 * 1024)   # app_partition_name
    assert app_partition(OTA, name="nope") == ("ota_0", 0x1C0000)       # unknown: the default
    assert app_partition("nvs, data, nvs, , 0x6000,\n") is None


def test_espidf_flash_budget_is_the_app_partition(tmp_path):
    # an 8 MB ESP32-S3-DevKitC-1 whose build flashes ESP-IDF's single-app table: 1 MB for the app
    part = app_partition(SINGLE_APP)
    facts = board_facts("esp32-s3-devkitc-1", manifest(**{"upload.maximum_size": 8388608}),
                        (f"app partition {part[0]} (partitions_singleapp.csv)", part[1]))
    assert facts.flash == 1024 * 1024
    small = BoardFacts("esp32-c3-devkitm-1", flash=100, ram=1 << 20, framework_ram=0,
                       stack=0, flash_region="app partition factory (partitions_singleapp.csv)")
    with pytest.raises(MsfError, match=r"esp32-c3-devkitm-1's app partition factory "
                                       r"\(partitions_singleapp.csv\) has 100 B"):
        generate_library(options("tiny"), tmp_path, small, 0)


def test_a_hifive1_build_leaves_the_users_python_alone():
    """platform-sifive 5.2.0's freedom-e-sdk builder runs `pip install pyparsing==2.4.5
    MarkupSafe==2.0.1 Jinja2==2.10.1` into PlatformIO's Python, the one msf-pio is installed in,
    unless `import jinja2` and `import pyparsing` both succeed there; pyparsing 2 then breaks
    matplotlib's import (msf-pio report's pictures). msf-pio's install brings both, so the
    builder installs nothing (scripts/real_boards.py checks the environment before and after)."""
    probe = "import jinja2, pyparsing, platformio; print(pyparsing.__version__)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split(".")[0]) >= 3
    requires = " ".join(importlib.metadata.requires("msf-pio") or [])
    assert "jinja2" in requires.lower() and "pyparsing" in requires.lower()
