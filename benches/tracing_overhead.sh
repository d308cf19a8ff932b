#!/usr/bin/env bash
# Tracing overhead matrix: runs benches/benches/tracing.rs with tracing
# compiled out (`--no-default-features`), compiled in (modes none and
# cached) and with `tracing-full` (mode full), alternately, ROUNDS times
# (default 3), and prints the median time per step of each workload and
# mode, and the ratio to compiled out (1.00 = no overhead).
#
#   bash benches/tracing_overhead.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# Build both first, so that the alternating runs measure only running.
cargo bench -p benches --bench tracing --no-default-features --no-run -q
cargo bench -p benches --bench tracing --no-run -q
cargo bench -p benches --bench tracing --features tracing-full --no-run -q

collect() { # $1: label of the run
  python3 - "$1" "$out" <<'PY'
import json, os, sys
label, out = sys.argv[1], sys.argv[2]
root = os.path.join("target", "criterion")
rows = []
for group in sorted(os.listdir(root)):
    if not group.startswith("Tracing_"):
        continue
    for variant in sorted(os.listdir(os.path.join(root, group))):
        est = os.path.join(root, group, variant, "new", "estimates.json")
        if os.path.exists(est):
            median = json.load(open(est))["median"]["point_estimate"]
            rows.append((group[len("Tracing_"):], variant, median))
with open(os.path.join(out, "results.jsonl"), "a") as f:
    for r in rows:
        f.write(json.dumps({"run": label, "workload": r[0], "variant": r[1], "ns": r[2]}) + "\n")
PY
}

for i in $(seq 1 "$rounds"); do
  echo "round $i/$rounds: compiled out" >&2
  rm -rf target/criterion/Tracing_*
  cargo bench -p benches --bench tracing --no-default-features -q -- --noplot >/dev/null
  collect "out$i"
  # Each mode in a process of its own (see the bench's comment).
  for mode in none cached; do
    echo "round $i/$rounds: compiled in, mode $mode" >&2
    rm -rf target/criterion/Tracing_*
    cargo bench -p benches --bench tracing -q -- --noplot "/$mode" >/dev/null
    collect "$mode$i"
  done
  echo "round $i/$rounds: tracing-full (full)" >&2
  rm -rf target/criterion/Tracing_*
  cargo bench -p benches --bench tracing --features tracing-full -q -- --noplot >/dev/null
  collect "full$i"
done

python3 - "$out" <<'PY'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(os.path.join(sys.argv[1], "results.jsonl"))]
steps = {"shallow_bind": 10000, "deep_bind": 10000, "delay_bind": 10000, "async": 100,
         "map_calls": 10000, "attempt": 10000, "start_join": 1000, "cede": 1000, "spawn": 10000}
variants = ["compiled_out", "none", "cached", "full"]
med = {}
rounds = sorted({r["run"][-1] for r in rows})
for w in steps:
    for v in variants:
        xs = [r["ns"] for r in rows if r["workload"] == w and r["variant"] == v]
        if xs:
            med[(w, v)] = statistics.median(xs)

def per_round_ratios(w, v):
    out = []
    for k in rounds:
        base = [r["ns"] for r in rows if r["workload"] == w and r["variant"] == "compiled_out" and r["run"].endswith(k)]
        xs = [r["ns"] for r in rows if r["workload"] == w and r["variant"] == v and r["run"].endswith(k)]
        if base and xs:
            out.append(xs[0] / base[0])
    return out
print("Tracing overhead: median time per step (ns) over %d rounds; ratio = mode / compiled out" % (
    len({r["run"] for r in rows}) // 4))
print()
print("| workload | compiled out | none | cached | full | none/out | cached/out | full/out |")
print("|---|---|---|---|---|---|---|---|")
for w, n in steps.items():
    base = med.get((w, "compiled_out"))
    cells = ["%.2f" % (med[(w, v)] / n) if (w, v) in med else "-" for v in variants]
    ratios = ["%.3f" % (med[(w, v)] / base) if base and (w, v) in med else "-" for v in variants[1:]]
    print("| %s | %s | %s |" % (w, " | ".join(cells), " | ".join(ratios)))
print()
print("Per-round ratios to compiled out (min to max):")
print()
print("| workload | none | cached | full |")
print("|---|---|---|---|")
for w in steps:
    cells = []
    for v in variants[1:]:
        rs = per_round_ratios(w, v)
        cells.append("%.3f to %.3f" % (min(rs), max(rs)) if rs else "-")
    print("| %s | %s |" % (w, " | ".join(cells)))
PY
