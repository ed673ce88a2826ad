#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Overhead and accuracy benchmark of tlsprof against its budget: writes BENCHMARKS.md. The code is the package
scripts/bench/ (see its __init__.py); `make bench` runs this with the defaults, `--help` lists the options."""

import os
import sys

# The package beside this file: Python puts this directory on sys.path itself, but not under -P or -I.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
