//! What tokio-console would show of a running program, read through
//! tokio-console's own client protocol (the `console-api` crate): connects
//! to `http://127.0.0.1:6669` (or the address given), reads updates for a
//! few seconds and prints each task with its fields, location, polls,
//! wakes and self-wakes.
//!
//! ```text
//! export RUSTFLAGS="--cfg tokio_unstable"
//! cargo run -p spindle-tracing --features console --example console -- 20 &
//! cargo run -p spindle-tracing --features console --example console_check
//! ```

use std::collections::HashMap;
use std::time::Duration;

use console_api::instrument::InstrumentRequest;
use console_api::instrument::instrument_client::InstrumentClient;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let target = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:6669".into());
    let mut client = InstrumentClient::connect(target).await?;
    let mut updates = client
        .watch_updates(InstrumentRequest {})
        .await?
        .into_inner();
    let mut tasks: HashMap<u64, String> = HashMap::new();
    let mut stats: HashMap<u64, console_api::tasks::Stats> = HashMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    // Until the deadline (a timeout ends the reading) or the stream ends.
    while let Ok(next) = tokio::time::timeout_at(deadline, updates.message()).await {
        let Some(update) = next? else { break };
        let Some(task_update) = update.task_update else {
            continue;
        };
        for task in task_update.new_tasks {
            let id = task.id.map_or(0, |id| id.id);
            let fields: Vec<String> = task
                .fields
                .iter()
                .map(|f| {
                    let name = match &f.name {
                        Some(console_api::field::Name::StrName(n)) => n.clone(),
                        Some(console_api::field::Name::NameIdx(i)) => format!("#{i}"),
                        None => String::from("?"),
                    };
                    format!("{name}={:?}", f.value)
                })
                .collect();
            let at = task
                .location
                .map(|l| format!("{}:{}", l.file.unwrap_or_default(), l.line.unwrap_or(0)))
                .unwrap_or_default();
            tasks.insert(id, format!("{} at {at}", fields.join(" ")));
        }
        stats.extend(task_update.stats_update);
    }
    println!("{} tasks", tasks.len());
    for (id, task) in &tasks {
        let s = stats.get(id);
        println!(
            "task {id}: {task}; polls {}, wakes {}, self-wakes {}",
            s.and_then(|s| s.poll_stats).map_or(0, |p| p.polls),
            s.map_or(0, |s| s.wakes),
            s.map_or(0, |s| s.self_wakes),
        );
    }
    Ok(())
}
