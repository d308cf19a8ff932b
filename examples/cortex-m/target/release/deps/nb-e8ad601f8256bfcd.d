/work/main/examples/cortex-m/target/release/deps/nb-e8ad601f8256bfcd.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/nb-0.1.3/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libnb-e8ad601f8256bfcd.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/nb-0.1.3/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libnb-e8ad601f8256bfcd.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/nb-0.1.3/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/nb-0.1.3/src/lib.rs:
