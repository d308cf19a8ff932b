/work/main/examples/cortex-m/target/release/deps/cortex_m_rt-1a64051c3219aea3.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-rt-0.7.7/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libcortex_m_rt-1a64051c3219aea3.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-rt-0.7.7/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libcortex_m_rt-1a64051c3219aea3.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-rt-0.7.7/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-rt-0.7.7/src/lib.rs:
