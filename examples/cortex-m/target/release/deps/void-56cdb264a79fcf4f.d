/work/main/examples/cortex-m/target/release/deps/void-56cdb264a79fcf4f.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/void-1.0.2/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libvoid-56cdb264a79fcf4f.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/void-1.0.2/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libvoid-56cdb264a79fcf4f.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/void-1.0.2/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/void-1.0.2/src/lib.rs:
