/work/main/examples/cortex-m/target/release/deps/vcell-65a6f55aa8452e36.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/vcell-0.1.3/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libvcell-65a6f55aa8452e36.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/vcell-0.1.3/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libvcell-65a6f55aa8452e36.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/vcell-0.1.3/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/vcell-0.1.3/src/lib.rs:
