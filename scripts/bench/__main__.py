# SPDX-License-Identifier: Apache-2.0
"""`python3 -m bench` from scripts/: the same as scripts/bench.py."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
