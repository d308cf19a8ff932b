//! Unix signals (`spindle_os::signal`) on every executor: a signal sent to
//! the process reaches the stream, one at a time or several, the handlers
//! are unregistered exactly once however the stream ends, and a signal
//! that cannot be handled is an error value.
//!
//! Signals are process-wide: every test holds [`SERIAL`], and checks that
//! the registrations it made are gone when it ends. The signals sent are
//! SIGUSR1, SIGUSR2, SIGWINCH and SIGURG: once signal-hook has installed
//! its handler for one, the signal is ignored by this process when no
//! registration is left (see the module's documentation), and SIGWINCH
//! and SIGURG are ignored by default anyway; a test sends a signal only
//! while a registration of it is alive, so that a lost handler would fail
//! the test (the process would end) rather than pass it.
#![cfg(unix)]

mod common;

use common::net::{HANG, failed, succeeded};
use common::{Serial, rt_test};

use std::io;
use std::ops::ControlFlow;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use spindle_core::IO;
use spindle_os::signal::{self, ForbiddenSignal, Signal};
use spindle_stream::Stream;

/// One test at a time (module doc).
static SERIAL: Mutex<()> = Mutex::new(());

/// Holds [`SERIAL`] and checks, at the end of a passing test, that every
/// registration the test made is removed.
fn serial() -> Serial {
    Serial::take(&SERIAL, signal::registrations, "signal registration")
}

/// Sends `signal` to the whole process (`kill(getpid(), signal)`: any
/// thread may take it, unlike `raise`).
fn kill_self(signal: Signal) -> IO<(), io::Error> {
    IO::delay(move || {
        let signal = rustix::process::Signal::from_named_raw(signal.as_raw())
            .expect("a signal rustix knows");
        rustix::process::kill_process(rustix::process::getpid(), signal)
    })
    .flat_map(|sent| match sent {
        Ok(()) => IO::unit(),
        Err(e) => IO::raise_error(io::Error::from(e)),
    })
}

/// Waits (sleeping a millisecond at a time, at most [`HANG`]) until more
/// than `before` registrations are alive: the stream under test has
/// registered its handlers.
fn until_registered(before: usize) -> IO<(), io::Error> {
    let start = Instant::now();
    IO::tail_rec((), move |()| {
        if signal::registrations() > before {
            IO::pure(ControlFlow::Break(()))
        } else if start.elapsed() > HANG {
            IO::raise_error(io::Error::other("the stream never registered its handlers"))
        } else {
            IO::sleep(Duration::from_millis(1)).map(|()| ControlFlow::Continue(()))
        }
    })
}

rt_test! {
    fn a_signal_sent_to_the_process_once_the_stream_listens_is_its_next_element() {
        let serial = serial();
        let rt = rt();
        let before = serial.before();
        let stream = signal::signals(&[Signal::SIGUSR2]).expect("SIGUSR2 can be handled");
        let (received, ()) = succeeded(
            &rt,
            stream
                .take(1)
                .compile()
                .to_vec()
                .both(until_registered(before).product_r(kill_self(Signal::SIGUSR2))),
        );
        assert_eq!(received, vec![Signal::SIGUSR2]);
        assert_eq!(signal::registrations(), before, "take(1) ended the registration");
    }

    fn two_signals_of_one_stream_arrive_in_the_order_they_were_sent() {
        let _serial = serial();
        let rt = rt();
        // Each element sends the next signal: USR2 first, then USR1, then
        // USR2 again; one stream listens to both.
        let program = signal::listen(&[Signal::SIGUSR1, Signal::SIGUSR2]).use_with(|listener| {
            let mut to_send = vec![Signal::SIGUSR1, Signal::SIGUSR2].into_iter();
            signal::raise(Signal::SIGUSR2).product_r(
                listener
                    .stream()
                    .eval_tap(move |_| match to_send.next() {
                        Some(next) => signal::raise(next),
                        None => IO::unit(),
                    })
                    .take(3)
                    .compile()
                    .to_vec(),
            )
        });
        let received = succeeded(&rt, program);
        assert_eq!(received, vec![Signal::SIGUSR2, Signal::SIGUSR1, Signal::SIGUSR2]);
    }

    fn signals_that_come_while_nobody_reads_are_kept_and_coalesced_per_signal() {
        let _serial = serial();
        let rt = rt();
        // Three deliveries of USR1 and one of WINCH before the first read:
        // one element each, then nothing more is pending.
        let program = signal::listen(&[Signal::SIGUSR1, Signal::SIGWINCH]).use_with(|listener| {
            // `raise` runs the handler before it returns: every delivery
            // is in before the first read.
            let (second, later) = (listener.clone(), listener.clone());
            signal::raise(Signal::SIGUSR1)
                .product_r(signal::raise(Signal::SIGUSR1))
                .product_r(signal::raise(Signal::SIGWINCH))
                .product_r(signal::raise(Signal::SIGUSR1))
                .product_r(listener.recv())
                .flat_map(move |a| second.recv().map(move |b| (a, b)))
                .flat_map(move |first_two| {
                    later
                        .recv()
                        .timeout_option(Duration::from_millis(100))
                        .map(move |third| (first_two, third))
                })
        });
        let ((a, b), third) = succeeded(&rt, program);
        let mut got = vec![a, b];
        got.sort();
        let mut expected = vec![Signal::SIGUSR1, Signal::SIGWINCH];
        expected.sort();
        assert_eq!(got, expected);
        assert_eq!(third, None, "the repeated SIGUSR1 was coalesced into one element");
    }

    fn next_waits_for_the_first_signal_of_its_set_and_then_unregisters() {
        let serial = serial();
        let rt = rt();
        let before = serial.before();
        let (got, ()) = succeeded(
            &rt,
            signal::next(&[Signal::SIGUSR1, Signal::SIGURG])
                .both(until_registered(before).product_r(kill_self(Signal::SIGURG))),
        );
        assert_eq!(got, Signal::SIGURG);
        assert_eq!(signal::registrations(), before);
    }

    fn the_registration_is_removed_exactly_once_when_the_stream_ends_fails_or_is_canceled() {
        let serial = serial();
        let rt = rt();
        let before = serial.before();

        // Ends: a `take` stops it.
        let during = succeeded(&rt, {
            let stream = signal::signals(&[Signal::SIGWINCH]).expect("SIGWINCH can be handled");
            stream
                .eval_map(|signal| IO::delay(move || (signal, signal::registrations())))
                .take(1)
                .compile()
                .to_vec()
                .both(until_registered(before).product_r(signal::raise(Signal::SIGWINCH)))
                .map(|(got, ())| got)
        });
        assert_eq!(during, vec![(Signal::SIGWINCH, before + 1)], "registered while it ran");
        assert_eq!(signal::registrations(), before, "unregistered after a take");

        // Fails: a stage after it raises an error.
        let error = failed(&rt, {
            let stream = signal::signals(&[Signal::SIGWINCH]).expect("SIGWINCH can be handled");
            stream
                .flat_map(|_| Stream::<(), io::Error>::raise_error(io::Error::other("boom")))
                .compile()
                .drain()
                .both(until_registered(before).product_r(signal::raise(Signal::SIGWINCH)))
        });
        assert_eq!(error.to_string(), "boom");
        assert_eq!(signal::registrations(), before, "unregistered after an error");

        // Canceled: a timeout cancels the stream while it waits.
        let waited = succeeded(&rt, {
            let stream = signal::signals(&[Signal::SIGWINCH]).expect("SIGWINCH can be handled");
            stream.compile().drain().timeout_option(Duration::from_millis(50))
        });
        assert_eq!(waited, None, "no SIGWINCH was sent: the stream waited");
        assert_eq!(signal::registrations(), before, "unregistered after cancellation");

        // The resource: released after its use.
        let listener = succeeded(&rt, signal::listen(&[Signal::SIGWINCH]).use_with(IO::pure));
        assert!(listener.is_closed());
        assert_eq!(signal::registrations(), before, "unregistered when released");
        // Receiving on it after its release is an error value, not a hang.
        let error = failed(&rt, listener.recv());
        assert!(error.to_string().contains("closed"), "{error}");
        // Its stream ends.
        assert_eq!(succeeded(&rt, listener.stream().compile().to_vec()), vec![]);

        // The handlers are gone: the signal now reaches no listener (and
        // SIGWINCH is harmless), and a new stream sees only what comes
        // after it registers.
        succeeded(&rt, signal::raise(Signal::SIGWINCH));
        let fresh = succeeded(
            &rt,
            signal::listen(&[Signal::SIGWINCH])
                .use_with(|listener| listener.recv().timeout_option(Duration::from_millis(50))),
        );
        assert_eq!(fresh, None, "a signal sent before the registration is not received");
    }

    fn a_signal_that_cannot_be_handled_is_an_error_value_naming_it() {
        let _serial = serial();
        let rt = rt();
        for forbidden in [Signal::SIGKILL, Signal::SIGSTOP, Signal::SIGSEGV, Signal::SIGILL, Signal::SIGFPE] {
            assert!(!forbidden.can_be_handled());
            let Err(error) = signal::signals(&[Signal::SIGUSR1, forbidden]) else {
                panic!("the stream is refused");
            };
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
            assert_eq!(ForbiddenSignal::of(&error).map(|f| f.signal()), Some(forbidden));
            assert!(error.to_string().contains(&forbidden.to_string()), "{error}");

            let error = failed(&rt, signal::next(&[forbidden]));
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
            assert!(error.to_string().starts_with(&format!("{forbidden} cannot be handled")), "{error}");

            let error = failed(&rt, signal::listen(&[forbidden]).use_with(|l| l.recv()));
            assert_eq!(ForbiddenSignal::of(&error).map(|f| f.signal()), Some(forbidden));
        }
        let Err(error) = signal::signals(&[]) else {
            panic!("an empty set is refused");
        };
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(Signal::SIGKILL.to_string(), "SIGKILL");
    }
}

#[test]
fn signals_are_named_and_numbered_as_the_system_numbers_them() {
    assert_eq!(Signal::SIGINT.to_string(), "SIGINT");
    assert_eq!(format!("{:?}", Signal::SIGTERM), "Signal(SIGTERM)");
    assert_eq!(
        Signal::from_raw(Signal::SIGHUP.as_raw()),
        Some(Signal::SIGHUP)
    );
    assert_eq!(Signal::SIGUSR1.name(), Some("SIGUSR1"));
    assert_eq!(Signal::from_raw(0), None);
    assert_eq!(Signal::from_raw(-3), None);
    assert_eq!(Signal::from_raw(10_000), None);
    #[cfg(target_os = "linux")]
    {
        let realtime = Signal::from_raw(40).expect("a real-time signal");
        assert_eq!(realtime.to_string(), "signal 40");
        assert!(realtime.can_be_handled());
    }
}
