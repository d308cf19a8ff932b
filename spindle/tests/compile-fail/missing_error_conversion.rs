// `?` in an IO block converts an awaited program's error with `From`, as
// `?` does anywhere: without `From<std::io::Error> for AppError` it
// cannot. Add the impl, or convert with `.map_err(..)` before the await.
use spindle_effect::IO;

#[derive(Debug)]
enum AppError {
    NotFound,
}

fn read_config() -> IO<String, std::io::Error> {
    IO::pure("port = 8080".to_string())
}

fn main() {
    let _program: IO<usize, AppError> = IO::block(async {
        let config = read_config().await?;
        if config.is_empty() {
            return Err(AppError::NotFound);
        }
        Ok(config.len())
    });
}
