#!/usr/bin/env bash
# Builds the firmware for thumbv7m, thumbv7em and thumbv6m, runs each under
# QEMU and checks its output and exit status; with `--sizes`, also prints
# the flash and static RAM of each build, with tracing compiled out and
# with cached tracing.
#
#   bash examples/cortex-m/run.sh [--sizes]
#
# Needs qemu-system-arm (Debian: apt-get install qemu-system-arm) and the
# three rustup targets; .ci/run installs both.
set -euo pipefail
cd "$(dirname "$0")"
# RUSTFLAGS from the environment would replace .cargo/config.toml's
# `-Tlink.x`, and the image would link empty.
unset RUSTFLAGS
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-../../target/cortex-m}"

# target, QEMU machine
machines=(
  "thumbv7m-none-eabi lm3s6965evb"
  "thumbv7em-none-eabihf mps2-an386"
  "thumbv6m-none-eabi microbit"
)

expect=(
  "spindle on cortex-m: start"
  "handshake: consumer got 42 after "
  "recovered: 7"
  "failure: reading out of range"
  "heap per suspended fiber: "
  "heap peak: "
  "spindle on cortex-m: ok"
)
# With tracing, the failure's trace: its events, in this crate's file.
expect_traced=(
  "  at flat_map @ src/main.rs:"
  "  at delay @ src/main.rs:"
)

run_one() { # target machine features-args...
  local target=$1 machine=$2; shift 2
  cargo build -q --release --target "$target" "$@"
  local elf="$CARGO_TARGET_DIR/$target/release/spindle-cortex-m"
  local out status=0
  out=$(timeout 60 qemu-system-arm -machine "$machine" -nographic \
    -semihosting-config enable=on,target=native -kernel "$elf" 2>/dev/null) || status=$?
  echo "--- $target on $machine ($*):"
  echo "$out"
  if [ "$status" -ne 0 ]; then
    echo "FAILED: $target on $machine exited with status $status" >&2
    return 1
  fi
  local line
  for line in "${expect[@]}"; do
    grep -qF -- "$line" <<<"$out" || { echo "FAILED: missing '$line'" >&2; return 1; }
  done
  if [ "$#" -eq 0 ]; then
    for line in "${expect_traced[@]}"; do
      grep -qF -- "$line" <<<"$out" || { echo "FAILED: missing '$line'" >&2; return 1; }
    done
    [ "$(grep -c '^  at ' <<<"$out")" -ge 6 ] || { echo "FAILED: the trace should have at least 6 events" >&2; return 1; }
  else
    ! grep -q '^  at ' <<<"$out" || { echo "FAILED: a trace without tracing" >&2; return 1; }
  fi
}

for m in "${machines[@]}"; do
  read -r target machine <<<"$m"
  run_one "$target" "$machine"
  run_one "$target" "$machine" --no-default-features
done

if [ "${1:-}" = "--sizes" ]; then
  echo
  echo "| target | tracing | flash (.text + .rodata) | static RAM (.data + .bss) |"
  echo "|---|---|---|---|"
  for m in "${machines[@]}"; do
    read -r target machine <<<"$m"
    for features in "--no-default-features" ""; do
      # shellcheck disable=SC2086
      cargo build -q --release --target "$target" $features
      elf="$CARGO_TARGET_DIR/$target/release/spindle-cortex-m"
      read -r text rodata data bss < <(arm-none-eabi-size -A "$elf" | awk '
        $1==".text"{t=$2} $1==".rodata"{r=$2} $1==".data"{d=$2} $1==".bss"{b=$2} $1==".uninit"{u=$2}
        END{print t+0, r+0, d+0, b+0}')
      echo "| $target | $([ -z "$features" ] && echo cached || echo "compiled out") | $((text + rodata)) B | $((data + bss)) B |"
    done
  done
fi
echo "cortex-m: all runs passed"
