#!/usr/bin/env python3
"""Prints the tables of BENCHMARKS.md from criterion's saved estimates.

Usage (after `cargo bench -p benches`), from the repository root:

    python3 benches/report.py                      # reads target/criterion
    python3 benches/report.py path/to/criterion    # another target dir
    python3 benches/report.py target/criterion RtMulti WorkStealing  # only these

For every criterion group `<Workload>.<variant>` with a `spindle/<size>` and
a `tokio/<size>` function, it reads `new/benchmark.json` (ids, declared
throughput) and `new/estimates.json` (the median, in ns per iteration) and
prints one markdown table per workload:

    ops/s      = 1e9 / median_ns            (one op = one whole program)
    ns/step    = median_ns / steps          (steps = declared Elements)
    ratio      = Spindle ops/s / tokio ops/s (above 1: Spindle is faster)

Groups that also have a `tokio_unconstrained` function (the same tokio
program without tokio's cooperative budget) or a `tokio_spawn` function (the
tokio program with each side of a `both`/`race` on a task of its own) get a
second, smaller table. A workload with several sizes (Deferred, Mutex) gets
one row per size; a group that runs on Spindle only shows n/a for tokio.

Standard library only, so it runs wherever the benchmarks do.
"""

import json
import os
import sys

# Tables in this order; variants in the order the bench files declare them.
WORKLOADS = [
    "ShallowBind",
    "DeepBind",
    "Attempt",
    "HandleError",
    "MapCalls",
    "Async",
    "Both",
    "Race",
    "Deferred",
    "Ref",
    "Queue",
    "Mutex",
    "Sleep",
    # exec-wstp against tokio's multi-thread runtime (benches/wstp.rs).
    "RtMulti",
    "WorkStealing",
    "Parallel",
    "WstpShallowBind",
    "WstpDeepBind",
]
VARIANTS = [
    "pure",
    "delay",
    "async",
    "async_callback",
    "happyPath",
    "errorRaised",
    "one",
    "batch30",
    "batch120",
    # Async (Cats Effect's AsyncBenchmark), alphabetical as there; "async"
    # is above.
    "bracket",
    "cancelBoundary",
    "cancelable",
    "parMap2",
    "race",
    "racePair",
    "start",
    "uncancelable",
    # Deferred, Ref, Queue, Mutex, Sleep ("happyPath" is above).
    "get",
    "complete",
    "cancel",
    "modify",
    "getAndUpdate",
    "boundedOne",
    "boundedMany",
    "boundedContended",
    "boundedContendedSingleConsumer",
    "unboundedOne",
    "unboundedMany",
    "unboundedContended",
    "highContention",
    "cancellation",
    "sleep",
    # exec-wstp (RtMulti, WorkStealing, Parallel; "pure" is above).
    "spawn_many_local",
    "spawn_many_remote_idle",
    "yield_many",
    "ping_pong",
    "chained_spawn",
    "scheduling",
    "alloc",
    "parTraverse",
    "parTraverse_cpu100",
]
SIDES = ("spindle", "tokio", "tokio_unconstrained", "tokio_spawn")

# The extra tokio functions, each with the caption of its table.
EXTRAS = [
    ("tokio_unconstrained", "tokio without its cooperative budget "
     "(`tokio::task::unconstrained`)", "unconstrained"),
    ("tokio_spawn", "tokio with each side on a task of its own "
     "(`tokio::spawn`)", "spawn"),
]


def load(criterion_dir):
    """{(group, side, size): (size, steps, median_ns)} for every saved benchmark."""
    found = {}
    for root, _dirs, files in os.walk(criterion_dir):
        if os.path.basename(root) != "new" or "benchmark.json" not in files:
            continue
        with open(os.path.join(root, "benchmark.json")) as f:
            bench = json.load(f)
        with open(os.path.join(root, "estimates.json")) as f:
            estimates = json.load(f)
        side = bench.get("function_id")
        if side not in SIDES:
            continue
        throughput = bench.get("throughput") or {}
        steps = throughput.get("Elements")
        if steps is None:
            sys.exit(f"{root}: no Elements throughput declared")
        median_ns = estimates["median"]["point_estimate"]
        size = bench.get("value_str")
        found[(bench["group_id"], side, size)] = (size, steps, median_ns)
    return found


def fmt_ops(ops):
    return f"{ops:,.0f}" if ops >= 100 else f"{ops:,.2f}"


def fmt_ns(ns):
    return f"{ns:,.1f}" if ns < 1000 else f"{ns:,.0f}"


def fmt_ratio(ratio):
    # Two decimals, as before; two significant digits below 0.1 (0.0021x),
    # so that a ratio far below 1 does not print as 0.00x.
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def variant_key(row):
    group, size = row
    variant = group.split(".", 1)[1]
    rank = VARIANTS.index(variant) if variant in VARIANTS else len(VARIANTS)
    return (rank, variant, int(size) if (size or "").isdigit() else 0, size or "")


def main():
    criterion_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get("CARGO_TARGET_DIR", "target"), "criterion"
    )
    if not os.path.isdir(criterion_dir):
        sys.exit(f"{criterion_dir}: not found (run `cargo bench -p benches` first)")
    only = set(sys.argv[2:])
    found = load(criterion_dir)
    rows = sorted({(group, size) for group, _side, size in found})
    for workload in WORKLOADS:
        if only and workload not in only:
            continue
        mine = sorted((r for r in rows if r[0].split(".", 1)[0] == workload), key=variant_key)
        if not mine:
            continue
        print(f"### {workload}\n")
        print(
            "| Benchmark | size | Spindle ops/s | Spindle ns/step "
            "| tokio ops/s | tokio ns/step | ratio (Spindle/tokio) |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for group, size in mine:
            row = [group]
            spindle = found.get((group, "spindle", size))
            tokio = found.get((group, "tokio", size))
            row.append(size or "")
            for side in (spindle, tokio):
                if side is None:
                    row += ["n/a", "n/a"]
                else:
                    _size, steps, median_ns = side
                    row += [fmt_ops(1e9 / median_ns), fmt_ns(median_ns / steps)]
            if spindle and tokio:
                row.append(fmt_ratio(tokio[2] / spindle[2]))
            else:
                row.append("n/a")
            print("| " + " | ".join(row) + " |")
        print()
        for side, caption, short in EXTRAS:
            extra = [(g, size) for g, size in mine if (g, side, size) in found]
            if not extra:
                continue
            print(f"{workload}, {caption}:\n")
            print(
                "| Benchmark | size | Spindle ns/step | tokio ns/step "
                f"| {short} tokio ops/s | {short} tokio ns/step "
                f"| ratio (Spindle/{short}) |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|")
            for group, size in extra:
                spindle = found.get((group, "spindle", size))
                tokio = found.get((group, "tokio", size))
                other = found[(group, side, size)]
                row = [group, size or ""]
                row.append(fmt_ns(spindle[2] / spindle[1]) if spindle else "n/a")
                row.append(fmt_ns(tokio[2] / tokio[1]) if tokio else "n/a")
                row += [fmt_ops(1e9 / other[2]), fmt_ns(other[2] / other[1])]
                row.append(fmt_ratio(other[2] / spindle[2]) if spindle else "n/a")
                print("| " + " | ".join(row) + " |")
            print()


if __name__ == "__main__":
    main()
