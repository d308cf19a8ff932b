//! The tokio reference of the `par_eval_map8` programs, shared by the
//! stream bench and the `stream_prof` example (tokio is a dev-dependency,
//! so it cannot live in the benches library next to
//! `benches::stream_programs`).

use core::future::Future;

use futures::StreamExt;

/// `futures::stream::iter(0..n)`, each element through a
/// `yield_now`-once future, eight at once in order (`buffered(8)`), summed
/// (wrapping).
pub fn buffered8(n: u64) -> impl Future<Output = u64> {
    futures::stream::iter(0..n)
        .map(|x| async move {
            tokio::task::yield_now().await;
            x + 1
        })
        .buffered(8)
        .fold(0u64, |acc, x| core::future::ready(acc.wrapping_add(x)))
}

/// `futures::stream::iter(0..n)`, each element through a future that
/// computes `benches::stream_programs::cpu_work`, eight at once in order
/// (`buffered(8)`: within the one task that polls the stream), summed.
pub fn buffered8_cpu(n: u64) -> impl Future<Output = u64> {
    futures::stream::iter(0..n)
        .map(|x| async move { benches::stream_programs::cpu_work(x) })
        .buffered(8)
        .fold(0u64, |acc, x| core::future::ready(acc.wrapping_add(x)))
}
