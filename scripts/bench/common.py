# SPDX-License-Identifier: Apache-2.0
"""What every part of the benchmark shares: the repository, errors, logging and the statistics of a series."""

import os
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A failure the user can act on: printed as one line."""


class Interrupted(BaseException):
    """A signal asked us to stop: clean up, then exit."""


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


def relative_error(value, truth):
    return (value / truth - 1) if value and truth else None


def paired_error(values, truths):
    """The median over runs of each run's value against the truth taken at the same time in that run: the
    machine's speed, which drifts from one run to the next, cancels within each pair."""
    return med([relative_error(v, t) for v, t in zip(values, truths)])
