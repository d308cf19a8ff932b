#!/usr/bin/env bash
# Builds the firmware for thumbv7m, thumbv7em and thumbv6m, runs each under
# QEMU and checks its output and exit status, with tracing compiled out and
# with cached tracing. Then the same for the size-optimized build of
# thumbv7m: nightly, core and alloc rebuilt (`-Zbuild-std`) with
# `panic = "immediate-abort"`, which drops the panic messages and the
# formatting code behind them (the usual recipe for the smallest image).
# With `--sizes`, also prints the flash and static RAM of every build.
#
#   bash examples/cortex-m/run.sh [--sizes]
#
# Needs qemu-system-arm and binutils-arm-none-eabi (Debian packages), the
# three rustup targets and nightly's rust-src; .ci/run installs them.
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
  "future: woken by SysTick after "
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

# The size-optimized build: its own target directory and flags (the config
# file's `-Tlink.x` repeated, since these flags replace it).
small_dir="$CARGO_TARGET_DIR-small"
build_small() { # target features-args...
  local target=$1; shift
  CARGO_TARGET_DIR="$small_dir" \
    CARGO_ENCODED_RUSTFLAGS=$'-Clink-arg=-Tlink.x\x1f-Zunstable-options\x1f-Cpanic=immediate-abort' \
    cargo +nightly build -q --release --target "$target" -Zbuild-std=core,alloc "$@"
}

run_one() { # small|stable target machine features-args...
  local kind=$1 target=$2 machine=$3; shift 3
  local elf
  if [ "$kind" = small ]; then
    build_small "$target" "$@"
    elf="$small_dir/$target/release/spindle-cortex-m"
  else
    cargo build -q --release --target "$target" "$@"
    elf="$CARGO_TARGET_DIR/$target/release/spindle-cortex-m"
  fi
  local out status=0
  out=$(timeout 60 qemu-system-arm -machine "$machine" -nographic \
    -semihosting-config enable=on,target=native -kernel "$elf" 2>/dev/null) || status=$?
  echo "--- $kind $target on $machine ($*):"
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
  run_one stable "$target" "$machine"
  run_one stable "$target" "$machine" --no-default-features
done
run_one small thumbv7m-none-eabi lm3s6965evb
run_one small thumbv7m-none-eabi lm3s6965evb --no-default-features

size_of() { # elf -> "flash static-ram"
  arm-none-eabi-size -A "$1" | awk '
    $1==".text"{t=$2} $1==".rodata"{r=$2} $1==".data"{d=$2} $1==".bss"{b=$2}
    END{print t+r, d+b}'
}

if [ "${1:-}" = "--sizes" ]; then
  echo
  echo "| target | tracing | flash (.text + .rodata) | static RAM (.data + .bss) | flash, size-optimized build |"
  echo "|---|---|---|---|---|"
  for m in "${machines[@]}"; do
    read -r target machine <<<"$m"
    for features in "--no-default-features" ""; do
      # shellcheck disable=SC2086
      cargo build -q --release --target "$target" $features
      # shellcheck disable=SC2086
      build_small "$target" $features
      read -r flash ram < <(size_of "$CARGO_TARGET_DIR/$target/release/spindle-cortex-m")
      read -r small_flash _ < <(size_of "$small_dir/$target/release/spindle-cortex-m")
      echo "| $target | $([ -z "$features" ] && echo cached || echo "compiled out") | $flash B | $ram B | $small_flash B |"
    done
  done
fi
echo "cortex-m: all runs passed"
