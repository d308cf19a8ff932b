//! An API that fits Rust's ownership, and error plumbing, on every executor:
//! the closures that build programs get owned values (`Resource::use_with`,
//! `flat_map`, `guarantee_case`, the brackets; the `_ref` forms lend),
//! `Outcome::into_result` and `Failure`, the free functions `sleep`, `cede`
//! and `never`, the operations that cannot fail taking their error type
//! from the program around them (in chains, and in IO blocks through
//! `.value()`), `timeout_option` on any error type, and `Supervisor` without
//! error conversions.
//!
//! Most bodies are written as an application writes them, with
//! `spindle_effect`'s names and without type annotations beyond the
//! program's own type: that they compile is half of what they test.

mod common;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{Counter, Log, rt_test};
use spindle_effect::error::Failure;
use spindle_effect::{
    Deferred, ExitCase, FiberHandle, IO, Outcome, Queue, Ref, Resource, Supervisor, UIO, cede,
    never, sleep,
};

/// An application's error type: no conversion from any of Spindle's errors.
#[derive(Debug, Clone, PartialEq)]
enum AppError {
    NotFound(u32),
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::NotFound(id) => write!(f, "{id} not found"),
        }
    }
}

impl std::error::Error for AppError {}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A cheap handle, as a socket or a connection pool is: `Clone`, shared.
#[derive(Clone)]
struct Handle {
    uses: Arc<AtomicU32>,
}

impl Handle {
    fn touch(&self) -> u32 {
        self.uses.fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// A resource of a [`Handle`] whose release counts on `released`.
fn handle_resource(released: &Counter) -> Resource<Handle, AppError> {
    let released = released.clone();
    Resource::make(
        IO::delay(|| Handle {
            uses: Arc::new(AtomicU32::new(0)),
        }),
        move |handle: Handle| {
            IO::delay(move || {
                assert!(
                    handle.uses.load(Ordering::SeqCst) > 0,
                    "released after its use"
                );
                released.incr();
            })
        },
    )
}

/// A value that is not `Clone` (a file, a raw descriptor).
struct Unique(u32);

rt_test! {
    // ----- owned values in closures ------------------------------------------------

    fn use_with_hands_the_program_an_owned_value_that_a_started_fiber_keeps() {
        let released = Counter::new();
        let io: IO<u32, AppError> = handle_resource(&released).use_with(|handle| {
            // The handle moves into a child fiber's program (`'static`).
            let child = IO::delay(move || handle.touch()).delay_by(ms(1));
            child.start().flat_map(|fiber| fiber.join_with_never())
        });
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(released.get(), 1, "released exactly once");
    }

    fn use_ref_lends_a_value_that_is_not_clone_and_releases_it_once() {
        let released = Counter::new();
        let r = released.clone();
        let resource: Resource<Unique, AppError> =
            Resource::make(IO::delay(|| Unique(21)), move |_| r.incr_io());
        let io = resource.use_ref(|unique| {
            let n = unique.0;
            IO::delay(move || n * 2)
        });
        assert_eq!(run(io), Outcome::Succeeded(42));
        assert_eq!(released.get(), 1);
    }

    fn resource_flat_map_hands_the_next_resource_an_owned_value_and_releases_in_reverse() {
        let log: Log<String> = Log::new();
        let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
        let outer: Resource<String, AppError> = Resource::make(
            IO::delay(|| "db".to_string()),
            move |name| l1.record(format!("close {name}")),
        );
        let both = outer.flat_map(move |name| {
            // The name is owned: the acquisition and the release keep it.
            Resource::make(
                IO::delay({
                    let name = name.clone();
                    move || format!("{name}/session")
                }),
                move |session| l2.record(format!("close {session} of {name}")),
            )
        });
        let io = both.use_with(move |session| l3.record(format!("use {session}")).map_to(session));
        assert_eq!(run(io), Outcome::Succeeded("db/session".to_string()));
        assert_eq!(
            log.events(),
            ["use db/session", "close db/session of db", "close db"]
        );
    }

    fn guarantee_case_hands_the_finalizer_an_owned_outcome_that_its_program_keeps() {
        let log: Log<Outcome<u32, AppError>> = Log::new();
        let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
        let ok: IO<u32, AppError> = IO::pure(7)
            .guarantee_case(move |outcome| IO::delay(move || l1.push(outcome)));
        let failed: IO<u32, AppError> = IO::raise_error(AppError::NotFound(3))
            .guarantee_case(move |outcome| IO::delay(move || l2.push(outcome)));
        let canceled: IO<u32, AppError> = IO::canceled()
            .map_to(1)
            .guarantee_case(move |outcome| IO::delay(move || l3.push(outcome)));
        assert_eq!(run(ok), Outcome::Succeeded(7));
        assert_eq!(run(failed), Outcome::Errored(AppError::NotFound(3)));
        assert_eq!(run(canceled), Outcome::Canceled);
        assert_eq!(
            log.events(),
            [
                Outcome::Succeeded(7),
                Outcome::Errored(AppError::NotFound(3)),
                Outcome::Canceled
            ],
            "each finalizer ran once, with its outcome"
        );
    }

    fn guarantee_case_ref_lends_the_outcome_of_a_program_whose_error_is_not_clone() {
        let log: Log<String> = Log::new();
        let l = log.clone();
        let read: IO<u32, std::io::Error> =
            IO::raise_error(std::io::Error::other("disk")).guarantee_case_ref(move |outcome| {
                let seen = match outcome.as_ref() {
                    Outcome::Errored(e) => format!("errored: {e}"),
                    other => format!("{:?}", other.is_succeeded()),
                };
                l.record(seen)
            });
        let outcome = run(read);
        assert_eq!(outcome.error().map(|e| e.to_string()), Some("disk".to_string()));
        assert_eq!(log.events(), ["errored: disk"]);
    }

    fn bracket_hands_the_use_a_clone_and_the_release_the_resource_once() {
        let released = Counter::new();
        let r = released.clone();
        let io: IO<u32, AppError> = IO::bracket(
            IO::delay(|| Handle { uses: Arc::new(AtomicU32::new(0)) }),
            // The use's program keeps its clone (a child fiber has it).
            |handle| IO::delay(move || handle.touch()).start().flat_map(|f| f.join_with_never()),
            move |handle| {
                let uses = handle.uses.load(Ordering::SeqCst);
                r.incr_io().map(move |()| assert_eq!(uses, 1))
            },
        );
        assert_eq!(run(io), Outcome::Succeeded(1));
        assert_eq!(released.get(), 1);
    }

    fn bracket_case_hands_the_release_an_owned_outcome() {
        let log: Log<(u32, Outcome<u32, AppError>)> = Log::new();
        let l = log.clone();
        let io: IO<u32, AppError> = IO::bracket_case(
            IO::pure(5u32),
            |n| IO::raise_error(AppError::NotFound(n)),
            move |n, outcome| IO::delay(move || l.push((n, outcome))),
        );
        assert_eq!(run(io), Outcome::Errored(AppError::NotFound(5)));
        assert_eq!(log.events(), [(5, Outcome::Errored(AppError::NotFound(5)))]);
    }

    fn bracket_full_ref_lends_a_resource_that_is_not_clone() {
        let released = Counter::new();
        let r = released.clone();
        let io: IO<u32, std::io::Error> = IO::bracket_full_ref(
            |_poll| IO::delay(|| Unique(4)),
            |unique| {
                let n = unique.0;
                IO::delay(move || n + 1)
            },
            move |_unique, outcome| {
                let succeeded = outcome.is_succeeded();
                r.incr_io().map(move |()| assert!(succeeded))
            },
        );
        assert_eq!(run(io).ok(), Some(5));
        assert_eq!(released.get(), 1);
    }

    fn a_background_fiber_is_used_through_its_lent_handle() {
        let io: IO<u32, AppError> = sleep(ms(1))
            .map_to(3u32)
            .background()
            .use_ref(|fiber: &FiberHandle<u32, AppError>| fiber.join_void().map_to(3));
        assert_eq!(run(io), Outcome::Succeeded(3));
    }

    // ----- Outcome as a Result ---------------------------------------------------------

    fn into_result_gives_the_value_or_the_failure_of_each_way_a_fiber_ends() {
        let ok: IO<u32, AppError> = IO::pure(1);
        let errored: IO<u32, AppError> = IO::raise_error(AppError::NotFound(2));
        let canceled: IO<u32, AppError> = IO::canceled().map_to(3);
        let panicked: IO<u32, AppError> = IO::delay(|| panic!("a bug"));
        assert_eq!(run(ok).into_result(), Ok(1));
        let errored = run(errored).into_result().unwrap_err();
        assert_eq!(errored, Failure::Errored(AppError::NotFound(2)));
        assert_eq!(errored.to_string(), "2 not found");
        let canceled = run(canceled).into_result().unwrap_err();
        assert!(canceled.is_canceled());
        assert_eq!(canceled.to_string(), "the fiber was canceled");
        let panicked = run(panicked).into_result().unwrap_err();
        assert!(panicked.is_panicked());
        assert_eq!(panicked.to_string(), "the fiber panicked: a bug");
        // Back to an outcome, and the friends.
        assert!(Outcome::<u32, _>::from(Err(panicked.clone())).is_panicked());
        assert_eq!(errored.clone().map(|e| e.to_string()), Failure::Errored("2 not found".to_string()));
        assert_eq!(errored.error(), Some(AppError::NotFound(2)));
        assert_eq!(Outcome::<u32, AppError>::Succeeded(4).ok(), Some(4));
        assert_eq!(Outcome::<u32, AppError>::Canceled.error(), None);
    }

    fn a_failure_converts_into_a_boxed_error_with_question_mark() {
        fn joined(outcome: Outcome<u32, AppError>) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
            Ok(outcome.into_result()? + 1)
        }
        assert_eq!(joined(run(IO::pure(41))).unwrap(), 42);
        let e = joined(run(IO::raise_error(AppError::NotFound(9)))).unwrap_err();
        assert_eq!(e.to_string(), "9 not found");
    }

    fn a_joined_fibers_failure_propagates_with_question_mark_in_a_block() {
        let program: IO<u32, Failure<AppError>> = IO::block(async {
            let base = IO::<u32, AppError>::pure(40).await?;
            let child = IO::<u32, AppError>::pure(2).start().value().await;
            let extra = child.join().value().await.into_result()?;
            Ok(base + extra)
        });
        assert_eq!(run(program), Outcome::Succeeded(42));
        let failing: IO<u32, Failure<AppError>> = IO::block(async {
            let child = IO::<u32, AppError>::raise_error(AppError::NotFound(1)).start().value().await;
            let never_reached = child.join().value().await.into_result()?;
            Ok(never_reached)
        });
        assert_eq!(run(failing), Outcome::Errored(Failure::Errored(AppError::NotFound(1))));
        let canceled: IO<u32, Failure<AppError>> = IO::block(async {
            let child = never::<u32, AppError>().start().value().await;
            child.cancel().value().await;
            child.join().value().await.into_result()
        });
        assert_eq!(run(canceled), Outcome::Errored(Failure::Canceled));
    }

    fn a_failure_of_an_io_error_program_converts_into_an_io_error() {
        let program: IO<u32, std::io::Error> = IO::block(async {
            let child = IO::<u32, std::io::Error>::raise_error(std::io::Error::other("refused"))
                .start()
                .value()
                .await;
            Ok(child.join().value().await.into_result()?)
        });
        let e = run(program).error().expect("an error");
        assert_eq!(e.to_string(), "refused");
        let canceled: IO<u32, std::io::Error> = IO::block(async {
            let child = never::<u32, std::io::Error>().start().value().await;
            child.cancel().value().await;
            Ok(child.join().value().await.into_result()?)
        });
        let e = run(canceled).error().expect("an error");
        assert_eq!(e.kind(), std::io::ErrorKind::Other);
        assert_eq!(e.to_string(), "the fiber was canceled");
    }

    // ----- operations that cannot fail, at any value and error type ---------------

    fn sleep_cede_and_never_fit_a_program_of_any_value_and_error_type() {
        let answer: IO<u64, std::io::Error> = sleep(ms(1)).product_r(cede()).product_r(IO::delay(|| 42));
        assert_eq!(run(answer).ok(), Some(42));
        let waited: IO<Option<String>, AppError> = never().timeout_option(ms(1));
        assert_eq!(run(waited), Outcome::Succeeded(None));
        let after: IO<&str, AppError> = IO::pure("late").delay_by(ms(1));
        assert_eq!(run(after), Outcome::Succeeded("late"));
    }

    fn start_queue_deferred_and_ref_take_their_error_type_from_the_chain() {
        let queue = Queue::<u32>::unbounded();
        let gate = Deferred::<u32>::new();
        let total = Ref::new(0u32);
        let (q, g, t) = (queue.clone(), gate.clone(), total.clone());
        // The child's error type is fixed by its own program, the rest by
        // the program's type: nothing is named in between.
        let child = g.get().flat_map(|n| if n > 0 { IO::pure(n) } else { IO::raise_error(AppError::NotFound(n)) });
        let program: IO<u32, AppError> = queue
            .offer(20)
            .product_r(q.take())
            .flat_map(move |n| t.update(move |x| *x += n))
            .product_r(child.start())
            .flat_map(move |waiter| gate.complete(2).product_r(waiter.join_with_never()))
            .flat_map(move |two| total.get().map(move |t| t + two + 20));
        assert_eq!(run(program), Outcome::Succeeded(42));
    }

    fn operations_that_cannot_fail_are_awaited_with_value_in_a_block() {
        let queue = Queue::<u32>::unbounded();
        let gate = Deferred::<u32>::new();
        let total = Ref::new(0u32);
        let program: IO<u32, AppError> = IO::block(async move {
            queue.offer(20).value().await;
            let n = queue.take().value().await;
            total.update(move |x| *x += n).value().await;
            let child: UIO<u32> = gate.get();
            let waiter = child.start().value().await;
            sleep(ms(1)).value().await;
            cede().value().await;
            let _ = gate.complete(2).value().await;
            let two = waiter.join().value().await.ok().unwrap_or(0);
            let found = IO::<u32, AppError>::pure(20).await?;
            Ok(total.get().value().await + two + found)
        });
        assert_eq!(run(program), Outcome::Succeeded(42));
    }

    fn a_program_that_cannot_fail_is_a_uio_without_naming_an_error_type() {
        let gate = Deferred::<u32>::new();
        let (reader, writer) = (gate.clone(), gate);
        let waiter: UIO<u32> = reader.get();
        let program: UIO<u32> = waiter
            .start()
            .flat_map(move |fiber| writer.complete(7).product_r(fiber.join()))
            .map(|outcome| outcome.ok().unwrap_or(0));
        assert_eq!(run(program), Outcome::Succeeded(7));
    }

    // ----- timeout_option ---------------------------------------------------------------

    fn timeout_option_gives_none_past_the_deadline_after_the_body_is_canceled_once() {
        let finalized = Counter::new();
        let slow: IO<u32, AppError> = sleep(Duration::from_secs(60)).map_to(1).on_cancel(finalized.incr_io());
        assert_eq!(run(slow.timeout_option(ms(5))), Outcome::Succeeded(None));
        assert_eq!(finalized.get(), 1, "the body was canceled and finalized once");
        let quick: IO<u32, AppError> = IO::pure(7);
        assert_eq!(run(quick.timeout_option(Duration::from_secs(60))), Outcome::Succeeded(Some(7)));
        let failing: IO<u32, AppError> = IO::raise_error(AppError::NotFound(1));
        assert_eq!(
            run(failing.timeout_option(Duration::from_secs(60))),
            Outcome::Errored(AppError::NotFound(1))
        );
    }

    // ----- Supervisor without error conversions --------------------------------------

    fn supervise_needs_no_error_conversion_and_fits_any_chain() {
        let finalized = Counter::new();
        let f = finalized.clone();
        let started = Deferred::<()>::new();
        let s = started.clone();
        let io: IO<u32, AppError> = Supervisor::scoped().use_with(move |supervisor| {
            // Its finalizer is in place before it says it started.
            let forever = s.complete(()).product_r(never::<u32, AppError>()).on_cancel(f.incr_io());
            supervisor
                .supervise(forever)
                .product_r(started.get())
                .product_r(supervisor.supervise(IO::<u32, AppError>::pure(7)))
                .flat_map(|quick| quick.join())
                .map(|outcome| outcome.ok().unwrap_or(0))
        });
        assert_eq!(run(io), Outcome::Succeeded(7));
        assert_eq!(finalized.get(), 1, "the scope's end canceled the child once");
    }

    fn supervise_is_awaited_with_value_in_a_block() {
        let io: IO<u32, AppError> = Supervisor::scoped().use_with(|supervisor| {
            IO::block(async move {
                let child = supervisor.supervise(IO::<u32, AppError>::pure(6)).value().await;
                let six = child.join().value().await.into_result().map_err(|_| AppError::NotFound(6))?;
                Ok(six * 7)
            })
        });
        assert_eq!(run(io), Outcome::Succeeded(42));
    }

    fn a_child_supervised_after_its_scope_has_closed_is_canceled_before_it_runs() {
        let ran = Counter::new();
        let r = ran.clone();
        let io: IO<Outcome<(), AppError>, AppError> = Supervisor::scoped()
            .use_with(IO::pure)
            .flat_map(move |escaped| escaped.supervise(r.incr_io()))
            .flat_map(|refused| refused.join());
        assert_eq!(run(io), Outcome::Succeeded(Outcome::Canceled));
        assert_eq!(ran.get(), 0);
    }

    fn a_resource_release_sees_how_an_owned_use_ended() {
        let exits: Log<ExitCase> = Log::new();
        let e = exits.clone();
        let resource: Resource<u32, AppError> =
            Resource::make_case(IO::pure(3), move |_, exit| IO::delay(move || e.push(exit)));
        let io: IO<u32, AppError> = resource.use_with(|n| IO::raise_error(AppError::NotFound(n)));
        assert_eq!(run(io), Outcome::Errored(AppError::NotFound(3)));
        assert_eq!(exits.events(), [ExitCase::Errored]);
    }
}
