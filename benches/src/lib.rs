//! Shared helpers of the Spindle benchmarks (the workloads live in `benches/`).
