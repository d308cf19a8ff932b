/work/main/examples/cortex-m/target/release/deps/cfg_if-e81e2ff07eca7f35.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cfg-if-1.0.5/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libcfg_if-e81e2ff07eca7f35.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cfg-if-1.0.5/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libcfg_if-e81e2ff07eca7f35.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cfg-if-1.0.5/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cfg-if-1.0.5/src/lib.rs:
