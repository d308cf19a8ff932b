/work/main/examples/cortex-m/target/release/deps/volatile_register-8f3bfe9d918c24f2.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/volatile-register-0.2.2/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libvolatile_register-8f3bfe9d918c24f2.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/volatile-register-0.2.2/src/lib.rs

/work/main/examples/cortex-m/target/release/deps/libvolatile_register-8f3bfe9d918c24f2.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/volatile-register-0.2.2/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/volatile-register-0.2.2/src/lib.rs:
