/work/main/examples/cortex-m/target/release/deps/cortex_m_rt_macros-856441fbd2a7e580.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-rt-macros-0.7.7/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libcortex_m_rt_macros-856441fbd2a7e580.so: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-rt-macros-0.7.7/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-rt-macros-0.7.7/src/lib.rs:
