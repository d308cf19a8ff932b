// The operations that cannot fail (`Ref::get`, `Queue::take`,
// `IO::sleep`, `start`, ...) are generic in their error type, so they fit
// any chain. In a block nothing fixes that type when the block's error has
// several `From` impls: `?` cannot pick one. `.value()` fixes it (to
// `Infallible`) and gives the value alone: `counter.get().value().await`.
use spindle_effect::error::TimeoutError;
use spindle_effect::{IO, Ref};

#[derive(Debug)]
enum AppError {
    Io(std::io::Error),
    Timeout,
}

impl From<std::io::Error> for AppError {
    fn from(e: std::io::Error) -> Self {
        AppError::Io(e)
    }
}

impl From<TimeoutError> for AppError {
    fn from(_: TimeoutError) -> Self {
        AppError::Timeout
    }
}

fn main() {
    let counter = Ref::new(0u32);
    let _program: IO<u32, AppError> = IO::block(async move {
        let n = counter.get().await?;
        Ok(n + 1)
    });
}
