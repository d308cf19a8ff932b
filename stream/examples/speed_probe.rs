//! A quick probe (not a benchmark): map/filter/fold over 10,000,000 u64.
use spindle_core::{IO, IORuntime};
use spindle_exec_single::SingleThreaded;
use spindle_stream::Stream;
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let n = 10_000_000u64;
    let rt = SingleThreaded::new().unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let p: IO<u64, ()> = Stream::range(0..black_box(n))
            .map(|x| x * 3)
            .filter(|x| x % 2 == 0)
            .compile()
            .fold(0u64, |a, x| a.wrapping_add(x));
        let s = rt.block_on(p).unwrap().succeeded().unwrap();
        let ts = t.elapsed();
        let t = Instant::now();
        let i = (0..black_box(n))
            .map(|x| x * 3)
            .filter(|x| x % 2 == 0)
            .fold(0u64, |a, x| a.wrapping_add(x));
        let ti = t.elapsed();
        assert_eq!(s, i);
        println!(
            "stream {:?} iterator {:?} ratio {:.2}",
            ts,
            ti,
            ts.as_secs_f64() / ti.as_secs_f64()
        );
    }
}
