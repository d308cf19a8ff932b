/work/main/examples/cortex-m/target/release/deps/spindle_exec_single-614349893d852bbd.d: /work/main/exec-single/src/lib.rs /work/main/exec-single/src/clock.rs /work/main/exec-single/src/platform/mod.rs /work/main/exec-single/src/platform/bare.rs /work/main/exec-single/src/testkit.rs

/work/main/examples/cortex-m/target/release/deps/libspindle_exec_single-614349893d852bbd.rlib: /work/main/exec-single/src/lib.rs /work/main/exec-single/src/clock.rs /work/main/exec-single/src/platform/mod.rs /work/main/exec-single/src/platform/bare.rs /work/main/exec-single/src/testkit.rs

/work/main/examples/cortex-m/target/release/deps/libspindle_exec_single-614349893d852bbd.rmeta: /work/main/exec-single/src/lib.rs /work/main/exec-single/src/clock.rs /work/main/exec-single/src/platform/mod.rs /work/main/exec-single/src/platform/bare.rs /work/main/exec-single/src/testkit.rs

/work/main/exec-single/src/lib.rs:
/work/main/exec-single/src/clock.rs:
/work/main/exec-single/src/platform/mod.rs:
/work/main/exec-single/src/platform/bare.rs:
/work/main/exec-single/src/testkit.rs:
