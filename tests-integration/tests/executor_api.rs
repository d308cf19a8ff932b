//! The public surface every executor shares, held to one behaviour: the
//! errors of `block_on` / `try_block_on` and building from the environment.

mod common;

use common::{RunError, rt_test};
use spindle_core::{Executor, IO, Outcome, UIO};

type Nested = Result<Outcome<u8, ()>, RunError>;

/// Set (to the test's name) in the environment of a child run of this
/// test binary.
const CHILD: &str = "IO_CORE_EXECUTOR_API_CHILD";

/// The address of an executor, for a fiber to call it back (see the
/// nested test).
struct Address<T>(*const T);

// SAFETY: only dereferenced while the executor is borrowed by the
// `block_on` that runs the fiber holding it; the single-threaded executors
// run that fiber on the thread that owns them, exec-wstp's `Runtime` and
// exec-tokio's `TokioExecutor` are `Sync`.
unsafe impl<T> Send for Address<T> {}

/// Runs the test `name` again in a child process of this test binary, with
/// `SPINDLE_TRACING` set to the empty string, and returns what it printed
/// to stderr. The child sees [`CHILD`] set to `name`.
fn stderr_of_child_with_empty_spindle_tracing(name: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .env("SPINDLE_TRACING", "")
        .output()
        .expect("run the child");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

rt_test! {
    fn try_block_on_of_never_is_a_deadlock_error() {
        assert_eq!(rt().try_block_on(UIO::<u8>::never()), Err(RunError::Deadlock));
        // The executor still runs programs afterwards.
        let rt = rt();
        assert_eq!(rt.try_block_on(UIO::<u8>::never()), Err(RunError::Deadlock));
        assert_eq!(rt.run(IO::<u8, ()>::pure(3)), Outcome::Succeeded(3));
    }

    fn a_block_on_inside_one_of_the_executors_own_fibers_is_refused_with_nested() {
        let rt = rt();
        // A fiber cannot capture the single-threaded executors (they are not
        // `Sync`); the test reaches this one through its address, which is
        // exactly the misuse the executors must catch.
        let address = Address(&rt);
        let io: IO<(Nested, Nested), ()> = IO::delay(move || {
            let address = address;
            // SAFETY: `rt` lives (borrowed by the `block_on` below) while
            // this fiber runs, and every method used takes `&self`.
            let rt = unsafe { &*address.0 };
            (rt.block_on(IO::pure(1)), rt.try_block_on(IO::pure(2)))
        });
        assert_eq!(
            rt.run(io),
            Outcome::Succeeded((Err(RunError::Nested), Err(RunError::Nested)))
        );
        // And the executor is unharmed.
        assert_eq!(rt.run(IO::<u8, ()>::pure(4)), Outcome::Succeeded(4));
    }

    fn a_quiet_executor_shuts_down_in_time_and_its_handle_then_refuses_to_spawn() {
        let rt = rt();
        assert_eq!(rt.run(IO::<u8, ()>::pure(6)), Outcome::Succeeded(6));
        let handle = rt.handle().clone();
        assert!(handle.spawn(IO::<(), ()>::unit()).is_ok());
        assert_eq!(rt.shutdown(std::time::Duration::from_secs(10)), Ok(()));
        assert!(handle.is_shut_down());
        assert!(matches!(
            handle.spawn(IO::<(), ()>::unit()),
            Err(RunError::ShutDown)
        ));
    }

    fn from_env_with_an_empty_spindle_tracing_builds_an_executor() {
        let name = format!("{}::from_env_with_an_empty_spindle_tracing_builds_an_executor", module_path!().split("::").last().unwrap_or_default());
        if std::env::var(CHILD).is_ok_and(|v| v == name) {
            // In the child, with SPINDLE_TRACING set to "".
            match Rt::from_env() {
                Ok(rt) => eprintln!("from_env: {:?}", rt.run(IO::<u8, ()>::pure(5))),
                Err(e) => eprintln!("from_env: failed: {e}"),
            }
            return;
        }
        let stderr = stderr_of_child_with_empty_spindle_tracing(&name);
        assert!(stderr.contains("from_env: Succeeded(5)"), "{stderr}");
    }
}

#[test]
fn fiber_config_from_env_treats_an_empty_spindle_tracing_as_unset() {
    const NAME: &str = "fiber_config_from_env_treats_an_empty_spindle_tracing_as_unset";
    if std::env::var(CHILD).is_ok_and(|v| v == NAME) {
        // In the child, with SPINDLE_TRACING set to "".
        eprintln!("from_env: {:?}", spindle_core::FiberConfig::from_env());
        return;
    }
    let stderr = stderr_of_child_with_empty_spindle_tracing(NAME);
    let expected = format!(
        "from_env: {:?}",
        Ok::<_, ()>(spindle_core::FiberConfig::default())
    );
    assert!(stderr.contains(&expected), "{expected} in:\n{stderr}");
}
