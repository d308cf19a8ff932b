/work/main/examples/cortex-m/target/release/deps/spindle_trace-29a777bc07f9599b.d: /work/main/trace/src/lib.rs /work/main/trace/src/ring.rs /work/main/trace/src/sync.rs

/work/main/examples/cortex-m/target/release/deps/libspindle_trace-29a777bc07f9599b.rlib: /work/main/trace/src/lib.rs /work/main/trace/src/ring.rs /work/main/trace/src/sync.rs

/work/main/examples/cortex-m/target/release/deps/libspindle_trace-29a777bc07f9599b.rmeta: /work/main/trace/src/lib.rs /work/main/trace/src/ring.rs /work/main/trace/src/sync.rs

/work/main/trace/src/lib.rs:
/work/main/trace/src/ring.rs:
/work/main/trace/src/sync.rs:
