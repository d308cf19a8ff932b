/work/main/examples/cortex-m/target/release/deps/cortex_m_macros-2715d7c4880d3850.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-macros-0.7.8/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libcortex_m_macros-2715d7c4880d3850.so: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-macros-0.7.8/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cortex-m-macros-0.7.8/src/lib.rs:
