/work/main/examples/cortex-m/target/release/deps/nb-0da00265fe39a65a.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/nb-1.1.0/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libnb-0da00265fe39a65a.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/nb-1.1.0/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libnb-0da00265fe39a65a.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/nb-1.1.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/nb-1.1.0/src/lib.rs:
