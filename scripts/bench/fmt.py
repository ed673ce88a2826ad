# SPDX-License-Identifier: Apache-2.0
"""How figures are written in BENCHMARKS.md: '–' for a figure not measured, medians with their range, tables."""

from .common import med, spread


def fnum(x, digits=1):
    return "–" if x is None else f"{x:,.{digits}f}"


def fmed(xs, digits=1):
    """'median (min–max)' of a series."""
    m, (lo, hi) = med(xs), spread(xs)
    if m is None:
        return "–"
    if len([x for x in xs if x is not None]) == 1:
        return fnum(m, digits)
    return f"{fnum(m, digits)} ({fnum(lo, digits)}–{fnum(hi, digits)})"


def fpct(x, digits=1, sign=True):
    if x is None:
        return "–"
    return f"{x * 100:+.{digits}f}%" if sign else f"{x * 100:.{digits}f}%"


def fpaired(xs, digits=2):
    """'median (min…max)' of paired figures, in %."""
    if not xs:
        return "–"
    if len(xs) == 1:
        return fpct(xs[0], digits)
    lo, hi = spread(xs)
    return f"{fpct(med(xs), digits)} ({fpct(lo, digits)}…{fpct(hi, digits)})"


def frange(lo_hi, digits=1):
    """'min…max' in %, or '–'."""
    lo, hi = lo_hi
    return "–" if lo is None else f"{fpct(lo, digits)}…{fpct(hi, digits)}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)
