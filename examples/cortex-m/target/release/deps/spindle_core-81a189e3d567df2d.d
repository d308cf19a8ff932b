/work/main/examples/cortex-m/target/release/deps/spindle_core-81a189e3d567df2d.d: /work/main/io-core/src/lib.rs /work/main/io-core/src/cancel.rs /work/main/io-core/src/concurrent.rs /work/main/io-core/src/config.rs /work/main/io-core/src/data/mod.rs /work/main/io-core/src/data/deferred.rs /work/main/io-core/src/data/latch.rs /work/main/io-core/src/data/mutex.rs /work/main/io-core/src/data/queue.rs /work/main/io-core/src/data/ref_.rs /work/main/io-core/src/data/resource.rs /work/main/io-core/src/data/semaphore.rs /work/main/io-core/src/data/waiters.rs /work/main/io-core/src/erased.rs /work/main/io-core/src/executor.rs /work/main/io-core/src/fiber/mod.rs /work/main/io-core/src/fiber/handle.rs /work/main/io-core/src/fiber/run_loop.rs /work/main/io-core/src/io.rs /work/main/io-core/src/node.rs /work/main/io-core/src/outcome.rs /work/main/io-core/src/pool.rs /work/main/io-core/src/sync.rs /work/main/io-core/src/timers.rs /work/main/io-core/src/tracing.rs

/work/main/examples/cortex-m/target/release/deps/libspindle_core-81a189e3d567df2d.rlib: /work/main/io-core/src/lib.rs /work/main/io-core/src/cancel.rs /work/main/io-core/src/concurrent.rs /work/main/io-core/src/config.rs /work/main/io-core/src/data/mod.rs /work/main/io-core/src/data/deferred.rs /work/main/io-core/src/data/latch.rs /work/main/io-core/src/data/mutex.rs /work/main/io-core/src/data/queue.rs /work/main/io-core/src/data/ref_.rs /work/main/io-core/src/data/resource.rs /work/main/io-core/src/data/semaphore.rs /work/main/io-core/src/data/waiters.rs /work/main/io-core/src/erased.rs /work/main/io-core/src/executor.rs /work/main/io-core/src/fiber/mod.rs /work/main/io-core/src/fiber/handle.rs /work/main/io-core/src/fiber/run_loop.rs /work/main/io-core/src/io.rs /work/main/io-core/src/node.rs /work/main/io-core/src/outcome.rs /work/main/io-core/src/pool.rs /work/main/io-core/src/sync.rs /work/main/io-core/src/timers.rs /work/main/io-core/src/tracing.rs

/work/main/examples/cortex-m/target/release/deps/libspindle_core-81a189e3d567df2d.rmeta: /work/main/io-core/src/lib.rs /work/main/io-core/src/cancel.rs /work/main/io-core/src/concurrent.rs /work/main/io-core/src/config.rs /work/main/io-core/src/data/mod.rs /work/main/io-core/src/data/deferred.rs /work/main/io-core/src/data/latch.rs /work/main/io-core/src/data/mutex.rs /work/main/io-core/src/data/queue.rs /work/main/io-core/src/data/ref_.rs /work/main/io-core/src/data/resource.rs /work/main/io-core/src/data/semaphore.rs /work/main/io-core/src/data/waiters.rs /work/main/io-core/src/erased.rs /work/main/io-core/src/executor.rs /work/main/io-core/src/fiber/mod.rs /work/main/io-core/src/fiber/handle.rs /work/main/io-core/src/fiber/run_loop.rs /work/main/io-core/src/io.rs /work/main/io-core/src/node.rs /work/main/io-core/src/outcome.rs /work/main/io-core/src/pool.rs /work/main/io-core/src/sync.rs /work/main/io-core/src/timers.rs /work/main/io-core/src/tracing.rs

/work/main/io-core/src/lib.rs:
/work/main/io-core/src/cancel.rs:
/work/main/io-core/src/concurrent.rs:
/work/main/io-core/src/config.rs:
/work/main/io-core/src/data/mod.rs:
/work/main/io-core/src/data/deferred.rs:
/work/main/io-core/src/data/latch.rs:
/work/main/io-core/src/data/mutex.rs:
/work/main/io-core/src/data/queue.rs:
/work/main/io-core/src/data/ref_.rs:
/work/main/io-core/src/data/resource.rs:
/work/main/io-core/src/data/semaphore.rs:
/work/main/io-core/src/data/waiters.rs:
/work/main/io-core/src/erased.rs:
/work/main/io-core/src/executor.rs:
/work/main/io-core/src/fiber/mod.rs:
/work/main/io-core/src/fiber/handle.rs:
/work/main/io-core/src/fiber/run_loop.rs:
/work/main/io-core/src/io.rs:
/work/main/io-core/src/node.rs:
/work/main/io-core/src/outcome.rs:
/work/main/io-core/src/pool.rs:
/work/main/io-core/src/sync.rs:
/work/main/io-core/src/timers.rs:
/work/main/io-core/src/tracing.rs:
