"""PlatformIO glue: offline bootstrap and the emulated-board platform (``platform/``)."""

import os

PLATFORM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "platform")
