use exec_single::SingleThreaded;
use io_core::IO;
use std::time::Duration;
fn main() {
    let mut rt = SingleThreaded::new();
    let io: IO<i32, String> = IO::pure(1).flat_map(|x| IO::delay(move || x + 1)).map(|x| x * 10);
    println!("{:?}", rt.block_on(io));
    let io: IO<u32, String> = IO::async_(|cb| { std::thread::spawn(move || { std::thread::sleep(Duration::from_millis(10)); cb.succeed(7); cb.succeed(8); }); None });
    println!("{:?}", rt.block_on(io));
    let io: IO<u32, String> = IO::sleep(Duration::from_millis(20)).as_(3);
    let t = std::time::Instant::now();
    println!("{:?} {:?}", rt.block_on(io), t.elapsed());
    let io: IO<u32, String> = IO::delay(|| panic!("kaboom"));
    println!("{:?}", rt.block_on(io));
    let io: IO<u32, String> = IO::never();
    println!("{:?}", rt.try_block_on(io));
    let mut io: IO<u64, String> = IO::pure(0);
    for _ in 0..1_000_000 { io = io.flat_map(|x| IO::pure(x + 1)); }
    let t = std::time::Instant::now();
    println!("{:?} {:?}", rt.block_on(io), t.elapsed());
    fn lp(i: u64) -> IO<u64, String> { if i < 1_000_000 { IO::pure(i + 1).flat_map(lp) } else { IO::pure(i) } }
    let t = std::time::Instant::now();
    println!("{:?} {:?}", rt.block_on(IO::pure(0).flat_map(lp)), t.elapsed());
    let io: IO<u64, String> = IO::raise_error("e".into()).map(|x: u64| x + 1).handle_error_with(|e: String| IO::pure(e.len() as u64));
    println!("{:?}", rt.block_on(io));
}
