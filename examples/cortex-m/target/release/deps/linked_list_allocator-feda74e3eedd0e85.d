/work/main/examples/cortex-m/target/release/deps/linked_list_allocator-feda74e3eedd0e85.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/linked_list_allocator-0.10.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/linked_list_allocator-0.10.6/src/hole.rs

/work/main/examples/cortex-m/target/release/deps/liblinked_list_allocator-feda74e3eedd0e85.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/linked_list_allocator-0.10.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/linked_list_allocator-0.10.6/src/hole.rs

/work/main/examples/cortex-m/target/release/deps/liblinked_list_allocator-feda74e3eedd0e85.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/linked_list_allocator-0.10.6/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/linked_list_allocator-0.10.6/src/hole.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/linked_list_allocator-0.10.6/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/linked_list_allocator-0.10.6/src/hole.rs:
