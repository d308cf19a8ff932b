/work/main/examples/cortex-m/target/release/deps/spindle_cortex_m-9112726072e76463.d: src/main.rs

/work/main/examples/cortex-m/target/release/deps/spindle_cortex_m-9112726072e76463: src/main.rs

src/main.rs:
