# SPDX-License-Identifier: Apache-2.0
"""Figures derived from the raw data: the runs of a condition, paired overheads, the noise, accuracy, memory."""

import statistics

from .common import med, paired_error, relative_error, spread

# (operation, fixture run, fixture field, openssl speed key); rustls' fixture makes the same four, without speed.
OPERATIONS = [
    ("RSA-2048 sign", ("x25519", "rsa2048"), "sign", "rsa2048_sign"),
    ("ECDSA P-256 sign", ("p256", "p256"), "sign", "ecdsap256_sign"),
    ("X25519 derive", ("x25519", "rsa2048"), "derive", "x25519_derive"),
    ("P-256 derive", ("p256", "p256"), "derive", "p256_derive"),
]


# BoringSSL's and AWS-LC's fixtures make whole handshakes, the others operations: (operation, fixture run, kind).
BORING_OPERATIONS = [
    ("RSA-2048 sign", ("x25519", "rsa2048"), "sign", None),
    ("ECDSA P-256 sign", ("p256", "p256"), "sign", None),
    ("server handshake, X25519 + RSA-2048", ("x25519", "rsa2048"), "handshake", None),
    ("server handshake, P-256 + ECDSA P-256", ("p256", "p256"), "handshake", None),
]
# The two kinds of operation each library's fixture times (their initials in its op log).
FIXTURE_KINDS = {"openssl": ("derive", "sign"), "go": ("derive", "sign"), "rustls": ("derive", "sign"),
                 "boringssl": ("handshake", "sign"), "aws-lc": ("handshake", "sign")}
HANDSHAKE_FIXTURES = ("boringssl", "aws-lc")
# Probed calls inside a fixture's clock window that tlsprof's function table leaves out: aws-lc-rs queries a
# signature's length with a first EVP_DigestSign call inside the `Signer::sign` the rustls fixture times.
UNCOUNTED_CALLS = {("rustls", "sign"): 1}
# Where the probed function encloses the fixture's window (bssl::ssl_private_key_sign around the private-key
# method the BoringSSL and AWS-LC fixtures time), its clock's reads outside the window (`clock_cost_us`) are the
# function's.
ENCLOSING = {("boringssl", "sign"), ("aws-lc", "sign")}


def fixture_library(run):
    """The TLS library a fixture run exercised: raw data from before rustls' fixture is all OpenSSL's."""
    return run["truth"].get("library", "openssl")


def runs_of(data, workload, condition):
    return [r for r in data["runs"] if r["workload"] == workload and r["condition"] == condition]


def paired(data, workload, condition, key="paired_overhead"):
    """The per-run paired figures of a condition: profiled twin / control twin − 1."""
    return [r[key] for r in runs_of(data, workload, condition) if r.get(key) is not None]


def noise_floor(data, workload):
    """The largest paired figure, either way, with no profiler on either twin: what the method resolves."""
    xs = paired(data, workload, "none")
    return max(abs(x) for x in xs) if xs else None


def per_request(data, workload, condition, key):
    """A figure of tlsprof's report per request of the profiled twin, median over runs."""
    return med([((r.get("prof_report") or {}).get(key) or 0) / r["requests"]
                for r in runs_of(data, workload, condition) if r.get("requests")])


def stated_cost(data, workload, condition):
    """What tlsprof's reports said it cost the profiled twin against what the twins measured, medians over runs:
    {probes, other, stated, measured}, shares of the profiled twin's CPU (the report states its probes'
    `probe_overhead_ms` and its other programs' `own_programs_ms` over the recording; the paired overhead,
    against the control twin, becomes overhead / (1 + overhead)). None when no run has both."""
    rs = runs_of(data, workload, condition)

    def share(r, key):
        rep = r.get("prof_report") or {}
        cpu = rep.get("process_cpu_ms")
        return None if not cpu or rep.get(key) is None else rep[key] / cpu

    stated = med([share(r, "probe_overhead_ms") + (share(r, "own_programs_ms") or 0) for r in rs
                  if share(r, "probe_overhead_ms") is not None])
    measured = med([ov / (1 + ov) for ov in paired(data, workload, condition)])
    if stated is None or measured is None:
        return None
    return {"probes": med([share(r, "probe_overhead_ms") for r in rs]),
            "other": med([share(r, "own_programs_ms") for r in rs]), "stated": stated, "measured": measured}


def unpaired_spread(data, workload):
    """With no profiler on either twin, each twin's CPU per request from run to run, relative to that twin's
    median: (min, max) over both twins. This is the noise the pairing cancels; it needs two runs or more."""
    rs = runs_of(data, workload, "none")
    if len(rs) < 2:
        return None, None
    devs = []
    for twin in ("A", "B"):
        xs = [(r if r["profiled_twin"] == twin else r["control"])["cpu_us_per_req_ns"] for r in rs]
        m = med(xs)
        devs += [x / m - 1 for x in xs]
    return spread(devs)


def background_cores(data):
    """(median, max) of what else the machine ran during the overhead runs, in cores."""
    xs = [r.get("background_cores") for r in data["runs"]]
    return med(xs), spread(xs)[1]


def own_cpu_projection(data, rate_to):
    """tlsprof's own CPU at `rate_to` handshakes/s, estimated from its CPU under the two workloads: the keep-alive
    figure (sampling a busy worker, no handshakes) as the fixed part, the rest of the full-handshake figure scaled
    with the handshake rate; and a linear upper bound that scales all of it. (None, None) without the figures."""
    full = runs_of(data, "full", "tlsprof")
    keep = runs_of(data, "keepalive", "tlsprof")
    frac_full, rate = med([r["prof_cpu_load_frac"] for r in full]), med([r["rate"] for r in full])
    frac_keep = med([r["prof_cpu_load_frac"] for r in keep])
    if frac_full is None or not rate:
        return None, None
    linear = frac_full * rate_to / rate
    if frac_keep is None:
        return linear, None
    fixed = min(frac_keep, frac_full)
    return linear, fixed + (frac_full - fixed) * rate_to / rate


def ops_in_windows(probed, twin, spans, kinds=("derive", "sign")):
    """Per stage: the mean thread CPU (µs) of the probed fixture's operations that began inside tlsprof's probe
    windows (`spans`, ns since the Unix epoch), of its twin's same operations (the i-th of a kind in each, made in
    turn with it), and how many. tlsprof's per-operation figures come from those windows only, and the machine's
    speed drifts from one second to the next: the whole run's means are not their ground truth."""
    out = {}
    for kind, stage in ((k[0], k) for k in kinds):
        mine = [op for op in probed if op[0] == kind]
        theirs = [op for op in twin if op[0] == kind]
        picked = [i for i, op in enumerate(mine) if i < len(theirs) and any(a <= op[1] < b for a, b in spans)]
        out[stage] = {"ops": len(picked),
                      "probed_cpu_us": statistics.fmean(mine[i][2] for i in picked) if picked else None,
                      "unprobed_cpu_us": statistics.fmean(theirs[i][2] for i in picked) if picked else None}
    return out


def _truth(run, stage, field):
    """The fixture's figure (`field`: probed or unprobed) for the operations made in tlsprof's windows; the whole
    run's in raw data from before the windows were dated."""
    window = (run.get("in_windows") or {}).get(stage) or {}
    if window.get(f"{field}_cpu_us") is not None:
        figure = window[f"{field}_cpu_us"]
    else:
        figure = run["truth"][f"unprobed_{stage}_cpu_us" if field == "unprobed" else f"{stage}_cpu_us"]
    if (fixture_library(run), stage) in ENCLOSING:
        figure += run["truth"]["clock_cost_us"]
    return figure


def accuracy_rows(data, library="openssl"):
    """Per operation: tlsprof against the fixture's unprobed twin, the operation made as `library` makes it and
    (OpenSSL) as `openssl speed` does (each run against its own twin, interleaved), and against `openssl speed`
    itself, which runs apart from the fixture's calls."""
    rows = []
    for name, (d, s), stage, speed_key in (BORING_OPERATIONS if library in HANDSHAKE_FIXTURES else OPERATIONS):
        runs = [r for r in data["accuracy"]
                if (r["derive_alg"], r["sign_alg"]) == (d, s) and fixture_library(r) == library]
        recs = [r for r in runs if not r.get("as_speed")]
        speed_recs = [r for r in runs if r.get("as_speed")]
        ours = [r[f"tlsprof_{stage}_us"] for r in recs]
        unprobed = [_truth(r, stage, "unprobed") for r in recs]
        probed = [_truth(r, stage, "probed") for r in recs]
        # What the fixture's clock saw minus the probe hits inside its window, at tlsprof's calibrated cost: none
        # inside an enclosing function's window; a handshake's not known (the fixture's client shares its frames).
        hits = [None if stage == "handshake" else 0 if (library, stage) in ENCLOSING else
                2 * ((r.get(f"{stage}_functions_per_op") or 1) + UNCOUNTED_CALLS.get((library, stage), 0))
                for r in recs]
        # Single-stepped hits cost their step too (raw data from before steps were counted: none).
        probed_corr = [None if h is None else
                       p - h * (r["probe_cost_us_per_hit"] or 0) - (r.get("steps_per_call") or 0) * h / 2 *
                       (r.get("probe_cost_us_per_step") or 0)
                       for r, p, h in zip(recs, probed, hits)]
        speed = [r[speed_key] for r in data["speed"]] if library == "openssl" else []
        ours_as_speed = [r[f"tlsprof_{stage}_us"] for r in speed_recs]
        fixture_as_speed = [_truth(r, stage, "unprobed") for r in speed_recs]
        # Counted in the probe windows (raw data from before the report kept them: the one count it had).
        calls = [r.get(f"tlsprof_{stage}_observed_calls", r[f"tlsprof_{stage}_calls"]) for r in runs]
        expected = [r["truth"][f"{stage}s"] for r in runs]
        m_unp, m_speed, m_ours_sp = med(unprobed), med(speed), med(ours_as_speed)
        rows.append({
            "name": name, "ours": ours, "unprobed": unprobed, "probed": probed, "probed_corr": probed_corr,
            "hits": med(hits), "speed": speed, "ours_as_speed": ours_as_speed, "fixture_as_speed": fixture_as_speed,
            "calls_ok": all(c == e for c, e in zip(calls, expected)) and bool(recs),
            "err_fixture": paired_error(ours, unprobed),
            "err_probed": paired_error(ours, probed_corr),
            "err_speed": relative_error(m_ours_sp, m_speed),
            "err_fixture_as_speed": paired_error(ours_as_speed, fixture_as_speed),
            "libssl_vs_speed": relative_error(m_unp, m_speed),
        })
    return rows


def rss_growth(samples):
    """RSS from the second tenth of the samples and the last tenth (medians), and the least-squares trend after
    the first minute in MB/min: (early, late, slope), None where there are too few samples."""
    s = [x for x in samples if x["rss_mb"]]
    if len(s) < 10:
        return None, None, None
    n = len(s)
    early = med([x["rss_mb"] for x in s[n // 10: 2 * n // 10]])
    late = med([x["rss_mb"] for x in s[-max(1, n // 10):]])
    pts = [x for x in s if x["t_s"] >= 60] or s
    if len(pts) >= 2:
        mt = statistics.mean(x["t_s"] for x in pts)
        mr = statistics.mean(x["rss_mb"] for x in pts)
        den = sum((x["t_s"] - mt) ** 2 for x in pts)
        slope = sum((x["t_s"] - mt) * (x["rss_mb"] - mr) for x in pts) / den * 60 if den else 0.0
    else:
        slope = None
    return early, late, slope


def counter_runs(data, workload):
    """The tlsprof runs (any mode) of a workload whose connection-counter programs were timed."""
    return [r for r in data["runs"] if r["workload"] == workload and r.get("counter")]


def counter_figures(data):
    """The connection counter's cost, from the kernel's BPF statistics over the load windows; None without them.

    Per full-handshake run: all its programs' run time (every process's accept/connect, the non-targets'
    early returns too) divided by the handshakes the profiled twin's clients completed (one connection each),
    against the CPU of a handshake on the unprofiled control twin in the same run. The keep-alive share puts that
    cost per connection against the control twin's CPU per keep-alive request in this benchmark run: a TLS
    connection costs at least one request, so it bounds the share for any connection."""
    full = counter_runs(data, "full")
    if not full:
        return None

    def totals(r):
        c = r["counter"]
        return sum(p["run_time_ns"] for p in c.values()), sum(p["run_cnt"] for p in c.values())

    per_run = []
    for r in full:
        ns, cnt = totals(r)
        per_run.append({"ns_per_run": ns / cnt if cnt else None, "runs_per_conn": cnt / r["requests"],
                        "ns_per_conn": ns / r["requests"],
                        "share_full": ns / r["requests"] / (r["control"]["cpu_us_per_req_ns"] * 1e3)})
    # The control twin is unprofiled in every run, whatever the condition.
    keep_ns = med([r["control"]["cpu_us_per_req_ns"] * 1e3 for r in data["runs"] if r["workload"] == "keepalive"])
    ns_per_conn = med([x["ns_per_conn"] for x in per_run])
    programs = {}
    for r in full + counter_runs(data, "keepalive"):
        for name, p in r["counter"].items():
            acc = programs.setdefault(name, {"run_time_ns": 0, "run_cnt": 0, "full_cnt": 0, "full_conns": 0})
            acc["run_time_ns"] += p["run_time_ns"]
            acc["run_cnt"] += p["run_cnt"]
            if r["workload"] == "full":
                acc["full_cnt"] += p["run_cnt"]
                acc["full_conns"] += r["requests"]
    return {
        "runs": len(full), "per_run": per_run,
        "ns_per_run": med([x["ns_per_run"] for x in per_run]),
        "runs_per_conn": med([x["runs_per_conn"] for x in per_run]),
        "ns_per_conn": ns_per_conn,
        "share_full": med([x["share_full"] for x in per_run]),
        "keepalive_ns": keep_ns,
        "share_keepalive": ns_per_conn / keep_ns if ns_per_conn is not None and keep_ns else None,
        "programs": programs,
    }


def serve_figures(serve):
    """The figures of the continuous-mode stage; None without one."""
    if not serve:
        return None
    slices = [x["paired_overhead"] for x in serve["slices"]]
    final, clients = serve["final"], serve["clients"]
    counted = [x["handshakes"] for x in serve["scrapes"] + [final] if x["handshakes"] is not None]
    early, late, slope = rss_growth(serve["samples"])
    return {
        "paired": serve["paired_overhead"], "slices": slices, "rss_early": early, "rss_late": late,
        "rss_slope": slope,
        "handshakes": final["handshakes"], "lower": final["handshakes_lower"], "upper": final["handshakes_upper"],
        "clients": clients, "inside": final["handshakes_lower"] <= clients <= final["handshakes_upper"],
        "error": relative_error(final["handshakes"], clients), "sign_cpu_s": final["sign_cpu_s"],
        "monotonic": all(b >= a for a, b in zip(counted, counted[1:])),
    }
