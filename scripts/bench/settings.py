# SPDX-License-Identifier: Apache-2.0
"""The settings of a run: their defaults, the copy saved with the raw data, and the command that repeats them."""

from .profilers import DEFAULT_CONDITIONS

DEFAULTS = {"rounds": 5, "seconds": 10, "long_minutes": 10, "serve_minutes": 30, "full_clients": 2,
            "speed_seconds": 2, "accuracy_repeats": 3}
# --smoke: a test-sized run that checks the harness, far too short to judge a figure. Its continuous-mode stage
# lasts long enough for a profile and a couple of scrapes.
SMOKE = {"rounds": 1, "seconds": 2, "long_minutes": 0, "serve_minutes": 0.5, "speed_seconds": 1,
         "accuracy_repeats": 1}
# --smoke runs every condition on nginx full handshakes (each profiler's harness) and, on the other workloads,
# only the conditions their sections and budget lines need: without a profiler, the defaults, and exact mode
# where a budget line judges it.
SMOKE_EVERY_CONDITION = "full"
SMOKE_CONDITIONS = {"go_full": ("none", "tlsprof", "tlsprof-exact")}
SMOKE_FEW_CONDITIONS = ("none", "tlsprof")
# Workloads measured under these conditions only, in every run, a smoke run included: the ECDSA twins are there
# for exact mode's price on cheaper handshakes.
WORKLOAD_CONDITIONS = {"ecdsa_full": ("none", "tlsprof-exact")}
# What a raw file saved before a setting existed ran: no continuous-mode stage.
BEFORE = {"serve_minutes": 0}


def setting(s, key):
    """A setting of a saved run, also of one saved before the setting existed."""
    return s.get(key, BEFORE.get(key, DEFAULTS[key]))


def settings_of(args):
    return {
        **{key: getattr(args, key) for key in DEFAULTS}, "conditions": list(args.conditions), "smoke": args.smoke,
        "go": args.go,
        "rustls": args.rustls,
        "boring": args.boring,
        "aws_lc": args.aws_lc,
        "java": args.java,
        "fixture_ops": {f"{d}/{s}": list(v) for (d, s), v in args.fixture_ops.items()},
        "fixture_handshakes": {f"{d}/{s}": v for (d, s), v in args.fixture_handshakes.items()},
    }


def reproduce_command(s):
    """The command that repeats this run: `python3 scripts/bench.py` plus whatever differs from the defaults."""
    go = "".join(f" --{flag.replace('_', '-')}" for flag in ("go", "rustls", "boring", "aws_lc", "java")
                 if s.get(flag))
    if s["smoke"]:
        return "sudo python3 scripts/bench.py --smoke" + go
    parts = ["sudo python3 scripts/bench.py" + go]
    for key, default in DEFAULTS.items():
        if setting(s, key) != default:
            parts.append(f"--{key.replace('_', '-')} {setting(s, key):g}")
    if s["conditions"] != DEFAULT_CONDITIONS:
        parts.append(f"--conditions {','.join(s['conditions'])}")
    return " ".join(parts)


def runs_condition(s, workload, condition):
    """Whether a run of these settings measures `condition` on `workload` (a smoke run, only some)."""
    if workload in WORKLOAD_CONDITIONS:
        return condition in WORKLOAD_CONDITIONS[workload]
    if not s["smoke"] or workload == SMOKE_EVERY_CONDITION:
        return True
    return condition in SMOKE_CONDITIONS.get(workload, SMOKE_FEW_CONDITIONS)
