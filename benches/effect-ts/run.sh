#!/usr/bin/env bash
# Installs the pinned `effect` package into target/effect-ts (outside the
# source tree, no lock file committed) and runs bench.mjs there.
#   bash benches/effect-ts/run.sh        (ROUNDS=10 WARMUP=3 by default)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$here/../../target/effect-ts"
mkdir -p "$work"
cp "$here/package.json" "$here/bench.mjs" "$work/"
cd "$work"
[ -d node_modules/effect ] || npm install --no-audit --no-fund --silent
echo "node $(node --version), effect $(node -p 'require("./node_modules/effect/package.json").version')"
node bench.mjs
