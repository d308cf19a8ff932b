/work/main/examples/cortex-m/target/release/deps/const_default-186f75335329b158.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/const-default-1.0.0/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libconst_default-186f75335329b158.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/const-default-1.0.0/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libconst_default-186f75335329b158.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/const-default-1.0.0/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/const-default-1.0.0/src/lib.rs:
