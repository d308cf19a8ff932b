/work/main/examples/cortex-m/target/release/deps/bare_metal-706c0155c8665565.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bare-metal-0.2.5/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libbare_metal-706c0155c8665565.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bare-metal-0.2.5/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libbare_metal-706c0155c8665565.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bare-metal-0.2.5/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bare-metal-0.2.5/src/lib.rs:
