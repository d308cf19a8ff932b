/work/main/examples/cortex-m/target/release/deps/portable_atomic_util-802e50d3b704ef61.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/utils.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/arc.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/task.rs

/work/main/examples/cortex-m/target/release/deps/libportable_atomic_util-802e50d3b704ef61.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/utils.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/arc.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/task.rs

/work/main/examples/cortex-m/target/release/deps/libportable_atomic_util-802e50d3b704ef61.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/utils.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/arc.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/task.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/utils.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/arc.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/portable-atomic-util-0.2.8/src/task.rs:
