"""Board facts: the part's real flash and RAM win over a wrong manifest, and the build budgets
everything the firmware holds (arena, I/O buffers, stack, the framework's own RAM), so a plan
the board cannot hold stops with one line naming what fits instead of failing at link time."""
import math

import pytest

from msf_pio.errors import MsfError
from msf_pio.pio.boards import BoardFacts, board_facts
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
    with pytest.raises(MsfError, match=r"the weights need \d+ B of flash, small has 100000 B"):
        generate_library(options("mbv2-w0.35-paper"), tmp_path, facts, 0)
