//! An HTTP/1.1 server on hyper whose request handlers are Spindle programs,
//! run as fibers on exec-tokio (the application is in `http/app.rs`).
//!
//! ```text
//! cargo run -p spindle-exec-tokio --example http_server -- 127.0.0.1:3000
//! curl http://127.0.0.1:3000/hello
//! curl -i http://127.0.0.1:3000/item/apple      # x-source: backend, then cache
//! curl -i http://127.0.0.1:3000/slow?ms=5000    # 503 after the 2 s timeout
//! curl -d 'some text' http://127.0.0.1:3000/echo
//! curl http://127.0.0.1:3000/stats
//! ```

#[path = "http/app.rs"]
mod app;

use spindle_exec_tokio::TokioExecutor;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3000".to_owned());
    // Attach to the runtime `#[tokio::main]` made: fibers and hyper's
    // connection tasks share its workers, timers and reactor.
    let executor = TokioExecutor::current()?;
    let listener = TcpListener::bind(&address).await?;
    println!("listening on http://{}", listener.local_addr()?);
    let app = app::App::new(executor, app::AppConfig::default());
    app::serve(listener, app).await;
    Ok(())
}
