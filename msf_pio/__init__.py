"""msf-pio: multi-stage fusion (msf-CNN) for int8 CNNs on microcontrollers, inside PlatformIO."""

__version__ = "0.1.0"
