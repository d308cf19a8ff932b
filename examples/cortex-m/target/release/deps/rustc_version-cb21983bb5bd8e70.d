/work/main/examples/cortex-m/target/release/deps/rustc_version-cb21983bb5bd8e70.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.2.3/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.2.3/src/errors.rs

/work/main/examples/cortex-m/target/release/deps/librustc_version-cb21983bb5bd8e70.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.2.3/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.2.3/src/errors.rs

/work/main/examples/cortex-m/target/release/deps/librustc_version-cb21983bb5bd8e70.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.2.3/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.2.3/src/errors.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.2.3/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rustc_version-0.2.3/src/errors.rs:
