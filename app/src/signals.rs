//! The signal thread (SIGINT/SIGTERM cancel the main fiber, a second one
//! exits at once; SIGUSR1 prints a dump) and the slot through which it
//! cancels the main fiber.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use spindle_core::executor::support::lists_fibers;
use spindle_core::{Executor, IORuntime};

use crate::CANCELED_EXIT_CODE;

/// Cancels the main fiber once it exists (a request that comes earlier is
/// kept and carried out when it does).
#[derive(Default)]
pub(crate) struct MainCancel {
    /// The canceler, once the fiber exists, and whether a cancellation was
    /// requested.
    state: Mutex<(Option<Canceler>, bool)>,
}

/// Cancels the main fiber.
type Canceler = Box<dyn Fn() + Send>;

impl MainCancel {
    pub(crate) fn set(&self, cancel: Canceler) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.1 {
            cancel();
        }
        state.0 = Some(cancel);
    }

    fn request(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.1 = true;
        if let Some(cancel) = &state.0 {
            cancel();
        }
    }
}

/// The text printed on SIGUSR1: a title line, the executor's metrics, then
/// its fiber dump (every live fiber with its state and trace, while fibers
/// are listed).
fn dump<R: IORuntime>(handle: &R::Handle) -> String {
    let mut out = format!("spindle runtime dump\n{}\n\n", R::handle_metrics(handle));
    let fibers = handle.fiber_dump();
    let _ = write!(out, "{fibers}");
    // The main fiber is live while the dump is taken: a dump without a
    // fiber means the executor lists none.
    if fibers.fibers.is_empty() && !lists_fibers(handle.config()) {
        out.push_str(
            "\n(fibers not listed: tracing mode `none` or compiled out, and \
             the builder's track_fibers off)",
        );
    }
    out.push('\n');
    out
}

/// The signal thread, while it runs.
pub(crate) struct SignalWatch {
    #[cfg(unix)]
    signals: Arc<spindle_os::signal::BlockingSignals>,
    #[cfg(unix)]
    thread: std::thread::JoinHandle<()>,
}

impl SignalWatch {
    /// Registers the handlers (spindle-os's signal registration, read by a
    /// thread of its own: it must act while the main fiber, or every
    /// thread of the executor, is busy) and starts the thread; `None`
    /// (with a warning on stderr) if either fails, or off Unix.
    #[cfg(unix)]
    pub(crate) fn start<R: IORuntime>(
        runtime: R::Handle,
        main: Arc<MainCancel>,
    ) -> Option<SignalWatch> {
        use spindle_os::signal::{BlockingSignals, Signal};
        let signals = match BlockingSignals::new(&[
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGUSR1,
        ]) {
            Ok(signals) => Arc::new(signals),
            Err(e) => {
                eprintln!(
                    "warning: could not install signal handlers ({e}); Ctrl-C will not run finalizers"
                );
                return None;
            }
        };
        let canceling = AtomicBool::new(false);
        let thread = std::thread::Builder::new()
            .name(String::from("spindle-signals"))
            .spawn({
                let signals = signals.clone();
                move || {
                    loop {
                        let signal = match signals.wait() {
                            Ok(Some(signal)) => signal,
                            // Closed by `stop`.
                            Ok(None) => break,
                            Err(e) => {
                                eprintln!("warning: the signal thread stopped ({e})");
                                break;
                            }
                        };
                        match signal {
                            Signal::SIGUSR1 => {
                                // One write: the dump is not interleaved
                                // with the program's own output line by
                                // line.
                                eprint!("{}", dump::<R>(&runtime));
                            }
                            _ if canceling.swap(true, Ordering::SeqCst) => {
                                eprintln!("second signal: exiting without waiting for finalizers");
                                std::process::exit(i32::from(CANCELED_EXIT_CODE));
                            }
                            // Cancel the main fiber; its finalizers run on
                            // the executor, and `run` returns once it ends.
                            _ => main.request(),
                        }
                    }
                }
            });
        match thread {
            Ok(thread) => Some(SignalWatch { signals, thread }),
            Err(e) => {
                eprintln!("warning: could not start the signal thread ({e})");
                None
            }
        }
    }

    /// Off Unix: no signal handling (Ctrl-C ends the process at once).
    #[cfg(not(unix))]
    pub(crate) fn start<R: IORuntime>(
        _runtime: R::Handle,
        _main: Arc<MainCancel>,
    ) -> Option<SignalWatch> {
        None
    }

    /// Unregisters the handlers (the thread's wait then returns) and joins
    /// the thread.
    pub(crate) fn stop(self) {
        #[cfg(unix)]
        {
            self.signals.close();
            let _ = self.thread.join();
        }
    }
}
