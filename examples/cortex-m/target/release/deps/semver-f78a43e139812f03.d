/work/main/examples/cortex-m/target/release/deps/semver-f78a43e139812f03.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/version.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/version_req.rs

/work/main/examples/cortex-m/target/release/deps/libsemver-f78a43e139812f03.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/version.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/version_req.rs

/work/main/examples/cortex-m/target/release/deps/libsemver-f78a43e139812f03.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/version.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/version_req.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/version.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/semver-0.9.0/src/version_req.rs:
