"""The ``kindling`` command-line interface."""
