/work/main/examples/cortex-m/target/release/deps/bitfield-32593e0f24d25802.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bitfield-0.13.2/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libbitfield-32593e0f24d25802.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bitfield-0.13.2/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libbitfield-32593e0f24d25802.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bitfield-0.13.2/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bitfield-0.13.2/src/lib.rs:
