//! The combinator form of `examples/pipeline.rs`: the same program with
//! `flat_map`, `tail_rec` and no IO blocks, to compare the two.
//!
//! A worker pipeline: a producer fiber fills a
//! bounded `Queue` with jobs, several worker fibers take them until the
//! queue is closed and drained, each job's flaky step is retried on an
//! exponential `Schedule`, and the whole pipeline runs under a deadline.
//!
//! It runs twice: once with room to finish (every job is done, some after
//! retries, one gives up after the schedule runs out), and once with a
//! deadline too short for its slow steps (the deadline cancels the
//! workers, and each worker's finalizer runs exactly once).
//!
//! ```text
//! cargo run -p spindle-effect --example pipeline_combinators
//! ```

use std::error::Error;
use std::fmt;
use std::ops::ControlFlow;
use std::time::Duration;

use spindle_effect::error::TimeoutError;
use spindle_effect::prelude::*;
use spindle_effect::{Queue, Ref, Schedule, wstp::Runtime};

/// A unit of work: its number, and how many of its first attempts fail.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// The job's number.
    pub id: u32,
    /// How many attempts of the flaky step fail before one succeeds.
    pub failures: u32,
}

/// How the pipeline ends when it does not finish.
#[derive(Debug, Clone, PartialEq)]
pub enum PipelineError {
    /// The overall deadline passed first.
    Deadline,
    /// The settings were refused (a queue capacity of zero).
    Settings(String),
    /// A step's error, carried while the worker records it (a job that
    /// gives up does not end the pipeline).
    Step(String),
}

impl From<TimeoutError> for PipelineError {
    fn from(_: TimeoutError) -> Self {
        PipelineError::Deadline
    }
}

impl Error for PipelineError {}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineError::Deadline => f.write_str("the pipeline missed its deadline"),
            PipelineError::Settings(why) => write!(f, "invalid settings: {why}"),
            PipelineError::Step(why) => write!(f, "a step failed: {why}"),
        }
    }
}

/// What the pipeline did, shared by its fibers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// `(job, result, attempts, worker)` for each job done, in order of
    /// completion.
    pub done: Vec<(u32, u64, u32, usize)>,
    /// The jobs whose step still failed when the schedule ran out.
    pub gave_up: Vec<u32>,
    /// How many workers' finalizers ran.
    pub workers_finished: usize,
}

/// The settings of one run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The jobs, in the order they are produced.
    pub jobs: Vec<Job>,
    /// The number of worker fibers.
    pub workers: usize,
    /// The capacity of the queue between the producer and the workers.
    pub capacity: usize,
    /// How long one attempt of the step takes.
    pub step_time: Duration,
    /// The deadline of the whole pipeline.
    pub deadline: Duration,
    /// When a failed step is tried again.
    pub retries: Schedule,
}

/// The flaky step: fails `job.failures` times, then produces its result.
fn flaky_step(job: Job, attempts: Ref<u32>, step_time: Duration) -> IO<u64, String> {
    IO::sleep(step_time)
        .product_r(attempts.update_and_get(|n| *n += 1))
        .flat_map(move |attempt| {
            if attempt <= job.failures {
                IO::raise_error(format!("job {} failed on attempt {attempt}", job.id))
            } else {
                IO::pure(u64::from(job.id) * 10)
            }
        })
}

/// The producer: offers every job (waiting while the queue is full), then
/// closes the queue so that the workers stop once it is drained.
fn produce(queue: Queue<Job>, jobs: Vec<Job>) -> IO<(), PipelineError> {
    let closing = queue.clone();
    IO::traverse(jobs, move |job| queue.offer(job)).product_r(closing.close().void())
}

/// One worker: takes jobs until the queue is closed and empty, runs each
/// job's step with retries, and records what happened. Its finalizer
/// counts it as finished however it ends (done, or canceled by the
/// deadline).
fn worker(
    worker: usize,
    queue: Queue<Job>,
    report: Ref<Report>,
    settings: Settings,
) -> IO<usize, PipelineError> {
    let finished = report.clone();
    IO::tail_rec(0usize, move |handled| {
        let report = report.clone();
        let settings = settings.clone();
        queue.receive().flat_map(move |job| match job {
            None => IO::pure(ControlFlow::Break(handled)),
            Some(job) => {
                let attempts = Ref::new(0u32);
                let counter = attempts.clone();
                // The step's own error, as a value: a job that gives up is
                // recorded, it does not end the pipeline.
                IO::retry(&settings.retries, move || {
                    flaky_step(job, counter.clone(), settings.step_time)
                })
                .map_err(PipelineError::Step)
                .attempt()
                .flat_map(move |result| {
                    attempts.get().flat_map(move |attempts| match result {
                        Ok(value) => {
                            report.update(move |r| r.done.push((job.id, value, attempts, worker)))
                        }
                        Err(_) => report.update(move |r| r.gave_up.push(job.id)),
                    })
                })
                .map(move |()| ControlFlow::Continue(handled + 1))
            }
        })
    })
    .guarantee(finished.update(|r| r.workers_finished += 1))
}

/// The pipeline: the producer on a fiber of its own, the workers in
/// parallel, all under the deadline. Produces how many jobs each worker
/// handled.
pub fn pipeline(settings: Settings, report: Ref<Report>) -> IO<Vec<usize>, PipelineError> {
    let deadline = settings.deadline;
    let queue = match Queue::bounded(settings.capacity) {
        Ok(queue) => queue,
        Err(e) => return IO::raise_error(PipelineError::Settings(e.to_string())),
    };
    produce(queue.clone(), settings.jobs.clone())
        .start()
        .flat_map(move |producer| {
            let workers = (1..=settings.workers).collect();
            IO::par_traverse(workers, move |w| {
                worker(w, queue.clone(), report.clone(), settings.clone())
            })
            .flat_map(move |handled| producer.join_with_never().map(move |()| handled))
        })
        .timeout(deadline)
}

/// The jobs of both runs: job 3 succeeds on its third attempt, job 5 on
/// its second, job 7 never (the schedule allows three retries).
pub fn jobs() -> Vec<Job> {
    (1..=8)
        .map(|id| Job {
            id,
            failures: match id {
                3 => 2,
                5 => 1,
                7 => u32::MAX,
                _ => 0,
            },
        })
        .collect()
}

/// One run: how many jobs each worker handled (or why the pipeline did
/// not finish), and what its fibers recorded.
pub type Run = (Result<Vec<usize>, PipelineError>, Report);

/// Runs the pipeline twice on the default executor: with room to finish,
/// then with a deadline its slow steps miss. Gives both results and
/// reports.
pub fn run() -> Result<[Run; 2], Box<dyn Error>> {
    let rt = Runtime::new()?;
    // 1 ms, 2 ms, 4 ms between attempts, then give up.
    let retries = Schedule::exponential(Duration::from_millis(1), 2)?.limit(3);
    let roomy = Settings {
        jobs: jobs(),
        workers: 3,
        capacity: 2,
        step_time: Duration::from_millis(1),
        deadline: Duration::from_secs(10),
        retries,
    };
    let tight = Settings {
        step_time: Duration::from_secs(5),
        deadline: Duration::from_millis(50),
        ..roomy.clone()
    };
    let mut runs = Vec::new();
    for settings in [roomy, tight] {
        let report = Ref::new(Report::default());
        let outcome = rt.block_on(pipeline(settings, report.clone()))?;
        let result = match outcome {
            Outcome::Succeeded(handled) => Ok(handled),
            Outcome::Errored(e) => Err(e),
            other => return Err(format!("the pipeline ended with {other:?}").into()),
        };
        let report = rt
            .block_on(report.get::<()>())?
            .succeeded()
            .ok_or("read the report")?;
        runs.push((result, report));
    }
    let [first, second]: [_; 2] = runs.try_into().map_err(|_| "two runs")?;
    Ok([first, second])
}

fn main() -> Result<(), Box<dyn Error>> {
    let [(finished, report), (late, late_report)] = run()?;
    let handled = finished?;
    println!("jobs handled per worker: {handled:?}");
    for (job, value, attempts, worker) in &report.done {
        println!("  job {job} -> {value} after {attempts} attempt(s), on worker {worker}");
    }
    println!(
        "  gave up on jobs {:?} after the schedule ran out",
        report.gave_up
    );
    println!("  {} workers finished", report.workers_finished);
    assert_eq!(
        report.done.len() + report.gave_up.len(),
        8,
        "every job was handled once"
    );
    assert_eq!(report.gave_up, [7]);
    println!(
        "with a 50 ms deadline and 5 s steps: {}; {} workers' finalizers ran",
        late.err()
            .map_or("finished?".to_string(), |e| e.to_string()),
        late_report.workers_finished
    );
    assert_eq!(
        late_report.workers_finished, 3,
        "each canceled worker finalized once"
    );
    Ok(())
}
