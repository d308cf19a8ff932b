#!/usr/bin/env python3
"""Prints the tables of BENCHMARKS.md from criterion's saved estimates.

Usage (after `cargo bench -p benches`), from the repository root:

    python3 benches/report.py                      # reads target/criterion
    python3 benches/report.py path/to/criterion    # another target dir

For every criterion group `<Workload>.<variant>` with a `spindle/<size>` and
a `tokio/<size>` function, it reads `new/benchmark.json` (ids, declared
throughput) and `new/estimates.json` (the median, in ns per iteration) and
prints one markdown table per workload:

    ops/s      = 1e9 / median_ns            (one op = one whole program)
    ns/step    = median_ns / steps          (steps = declared Elements)
    ratio      = Spindle ops/s / tokio ops/s (above 1: Spindle is faster)

Groups that also have a `tokio_unconstrained` function (the same tokio
program without tokio's cooperative budget) get a second, smaller table.

Standard library only, so it runs wherever the benchmarks do.
"""

import json
import os
import sys

# Tables in this order; variants in the order the bench files declare them.
WORKLOADS = ["ShallowBind", "DeepBind", "Attempt", "HandleError", "MapCalls"]
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
]
SIDES = ("spindle", "tokio", "tokio_unconstrained")


def load(criterion_dir):
    """{(group, side): (size, steps, median_ns)} for every saved benchmark."""
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
        found[(bench["group_id"], side)] = (bench.get("value_str"), steps, median_ns)
    return found


def fmt_ops(ops):
    return f"{ops:,.0f}" if ops >= 100 else f"{ops:,.2f}"


def fmt_ns(ns):
    return f"{ns:,.1f}" if ns < 1000 else f"{ns:,.0f}"


def variant_key(group):
    variant = group.split(".", 1)[1]
    return (VARIANTS.index(variant) if variant in VARIANTS else len(VARIANTS), variant)


def main():
    criterion_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get("CARGO_TARGET_DIR", "target"), "criterion"
    )
    if not os.path.isdir(criterion_dir):
        sys.exit(f"{criterion_dir}: not found (run `cargo bench -p benches` first)")
    found = load(criterion_dir)
    groups = sorted({group for group, _ in found})
    for workload in WORKLOADS:
        mine = sorted((g for g in groups if g.split(".", 1)[0] == workload), key=variant_key)
        if not mine:
            continue
        print(f"### {workload}\n")
        print(
            "| Benchmark | size | Spindle ops/s | Spindle ns/step "
            "| tokio ops/s | tokio ns/step | ratio (Spindle/tokio) |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for group in mine:
            row = [group]
            spindle = found.get((group, "spindle"))
            tokio = found.get((group, "tokio"))
            row.append((spindle or tokio)[0] or "")
            for side in (spindle, tokio):
                if side is None:
                    row += ["n/a", "n/a"]
                else:
                    _size, steps, median_ns = side
                    row += [fmt_ops(1e9 / median_ns), fmt_ns(median_ns / steps)]
            if spindle and tokio:
                row.append(f"{tokio[2] / spindle[2]:.2f}x")
            else:
                row.append("n/a")
            print("| " + " | ".join(row) + " |")
        print()
        extra = [g for g in mine if (g, "tokio_unconstrained") in found]
        if extra:
            print(f"{workload}, tokio without its cooperative budget "
                  "(`tokio::task::unconstrained`):\n")
            print(
                "| Benchmark | size | Spindle ns/step | tokio ns/step "
                "| unconstrained tokio ops/s | unconstrained tokio ns/step "
                "| ratio (Spindle/unconstrained) |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|")
            for group in extra:
                spindle = found.get((group, "spindle"))
                tokio = found.get((group, "tokio"))
                free = found[(group, "tokio_unconstrained")]
                row = [group, free[0] or ""]
                row.append(fmt_ns(spindle[2] / spindle[1]) if spindle else "n/a")
                row.append(fmt_ns(tokio[2] / tokio[1]) if tokio else "n/a")
                row += [fmt_ops(1e9 / free[2]), fmt_ns(free[2] / free[1])]
                row.append(f"{free[2] / spindle[2]:.2f}x" if spindle else "n/a")
                print("| " + " | ".join(row) + " |")
            print()


if __name__ == "__main__":
    main()
