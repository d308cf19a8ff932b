//! Stress: a fiber canceled inside nests of `bracket`, `uncancelable`
//! (with and without `poll`, with masked sleeps around it), `on_cancel`,
//! `guarantee`, async waits, sleeps and cedes.
//!
//! * On virtual time (`TestControl`), at a random moment:
//!   [`VIRTUAL_ITERATIONS`] random nests, the cancel after a random number
//!   of cedes or a random virtual delay, the async waits completed by a
//!   sibling fiber at random virtual times.
//! * On virtual time, at every moment: [`SHAPES`] nests of nested
//!   resources (`bracket` around a masked region that polls the rest,
//!   sometimes through an async wait completed 2 ms after it starts), each
//!   canceled at every millisecond of its run, so that every suspension
//!   point is hit.
//! * On the real `spindle_exec_single::SingleThreaded`: [`REAL_ITERATIONS`] runs,
//!   with real (microsecond) sleeps, the async waits completed from other
//!   threads at random moments.
//!
//! Every run records what happened (acquisitions, releases, regions entered
//! and left, finalizers, deliveries of async callbacks) and checks:
//! every acquired resource is released exactly once; an unpolled
//! uncancelable region that was entered ran to its end; an `on_cancel`
//! finalizer ran exactly when the fiber was canceled inside its scope; a
//! `guarantee` finalizer ran exactly once; an async wait was finalized
//! exactly when its callback did not resume it; the canceled fiber has an
//! outcome, the whole program completed (no deadlock), and nothing of the
//! fiber's program is left (every closure it captured has been dropped);
//! on virtual time, no timer is left behind either.
//!
//! A failure prints the seed and the nest; runs are reproducible on virtual
//! time.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use spindle_core::{Callback, IO, IORuntime, Outcome};
use spindle_exec_single::SingleThreaded;
use spindle_exec_single::testkit::TestControl;

const VIRTUAL_ITERATIONS: u64 = if cfg!(miri) { 100 } else { 10_000 };
const REAL_ITERATIONS: u64 = if cfg!(miri) { 10 } else { 1_000 };
/// How many nests of nested resources; each is canceled at every
/// millisecond of its run.
const SHAPES: u64 = if cfg!(miri) { 3 } else { 700 };

// ---------------------------------------------------------------------------
// Randomness (splitmix64: reproducible from a seed, no dependency)
// ---------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

// ---------------------------------------------------------------------------
// The nest
// ---------------------------------------------------------------------------

/// One region around the rest of the nest; durations in units (1 ms of
/// virtual time, or [`REAL_UNIT`] of real time).
#[derive(Clone, Copy, Debug)]
enum Layer {
    /// `bracket`: acquisition and release sleep (masked).
    Bracket { acquire: u64, release: u64 },
    /// `uncancelable`, the rest of the nest inside `poll` or not, after a
    /// masked sleep of `before` and followed by one of `after` (none when
    /// 0).
    Uncancelable { poll: bool, before: u64, after: u64 },
    /// `on_cancel` around the rest of the nest.
    OnCancel,
    /// `guarantee` around the rest of the nest; the finalizer sleeps.
    Guarantee { fin: u64 },
    /// An async wait (for the gate of this layer), then the rest.
    Async,
    /// A sleep, then the rest.
    Sleep(u64),
    /// A cede, then the rest.
    Cede,
}

/// The innermost program.
#[derive(Clone, Copy, Debug)]
enum Core {
    Sleep(u64),
    /// An async wait for the core's gate.
    Async,
}

/// Where the canceler cancels.
#[derive(Clone, Copy, Debug)]
enum CancelAt {
    /// After this many cedes.
    Cedes(u64),
    /// After this many units of time.
    After(u64),
}

#[derive(Clone, Debug)]
struct Nest {
    layers: Vec<Layer>,
    core: Core,
    cancel_at: CancelAt,
    /// When each gate opens (one per layer, the core's last), in units.
    gate_times: Vec<u64>,
}

impl Nest {
    fn random(rng: &mut Rng) -> Nest {
        let depth = 1 + rng.below(6) as usize;
        let layers = (0..depth)
            .map(|_| match rng.below(7) {
                0 => Layer::Bracket {
                    acquire: rng.below(6),
                    release: rng.below(6),
                },
                1 => Layer::Uncancelable {
                    poll: rng.chance(50),
                    before: 0,
                    after: 0,
                },
                2 => Layer::OnCancel,
                3 => Layer::Guarantee { fin: rng.below(6) },
                4 => Layer::Async,
                5 => Layer::Sleep(rng.below(10)),
                _ => Layer::Cede,
            })
            .collect();
        let core = if rng.chance(50) {
            Core::Sleep(rng.below(30))
        } else {
            Core::Async
        };
        let cancel_at = if rng.chance(30) {
            CancelAt::Cedes(rng.below(8))
        } else {
            CancelAt::After(rng.below(60))
        };
        let gate_times = (0..=depth).map(|_| rng.below(60)).collect();
        Nest {
            layers,
            core,
            cancel_at,
            gate_times,
        }
    }

    /// Nested resources, `depth` 1 to 3, each level
    /// `bracket(acquire, uncancelable(sleep; poll(rest); sleep), release)`,
    /// the rest starting with an async wait or not; the core completes at
    /// once. An async wait's gate opens 2 ms after the wait starts (in a
    /// run that is not canceled). Returns the nest and a generous bound of
    /// its run time when it is not canceled, in ms.
    fn nested_resources(rng: &mut Rng) -> (Nest, u64) {
        let depth = 1 + rng.below(3) as usize;
        let mut layers = Vec::new();
        let mut gate_times = Vec::new();
        // When the next layer starts, in a run that is not canceled.
        let mut start = 0;
        let mut horizon = 2;
        for _ in 0..depth {
            let (acquire, before) = (rng.below(3), rng.below(3));
            let (after, release) = (rng.below(3), rng.below(3));
            let wait = rng.below(2) == 0;
            layers.push(Layer::Bracket { acquire, release });
            layers.push(Layer::Uncancelable {
                poll: true,
                before,
                after,
            });
            start += acquire + before;
            horizon += acquire + before + after + release + 2;
            gate_times.extend([0, 0]);
            if wait {
                layers.push(Layer::Async);
                start += 2;
                gate_times.push(start);
            }
        }
        // The core's gate (unused: the core sleeps for 0).
        gate_times.push(0);
        let nest = Nest {
            layers,
            core: Core::Sleep(0),
            cancel_at: CancelAt::After(0),
            gate_times,
        };
        (nest, horizon)
    }
}

// ---------------------------------------------------------------------------
// What happened
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
enum Event {
    Acquire(usize),
    Release(usize),
    Enter(usize),
    Exit(usize),
    /// The rest of the nest inside an `on_cancel` completed.
    Done(usize),
    /// A finalizer of layer `i` ran (`on_cancel`, `guarantee`).
    Fin(usize),
    /// The async wait of layer `i` registered its callback.
    Registered(usize),
    /// The async wait of layer `i` was finalized (canceled while waiting).
    AsyncFin(usize),
    /// Gate `i` called its waiter's callback, which returned this.
    Delivered(usize, bool),
}

/// The record of one run.
#[derive(Clone, Default)]
struct Ledger {
    events: Arc<Mutex<Vec<Event>>>,
}

impl Ledger {
    fn push(&self, event: Event) {
        self.events.lock().unwrap().push(event);
    }

    fn record(&self, event: Event) -> IO<(), ()> {
        let ledger = self.clone();
        IO::delay(move || ledger.push(event))
    }

    fn count(&self, event: Event) -> usize {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| **e == event)
            .count()
    }

    fn delivered(&self, gate: usize) -> Option<bool> {
        self.events.lock().unwrap().iter().find_map(|e| match e {
            Event::Delivered(g, accepted) if *g == gate => Some(*accepted),
            _ => None,
        })
    }
}

/// Counts the live captures of the target program: each layer's closure
/// holds a clone, so the count is back to one once nothing of the program
/// is left.
#[derive(Default)]
struct Live(Arc<()>);

impl Live {
    fn token(&self) -> Arc<()> {
        self.0.clone()
    }

    fn tokens(&self) -> usize {
        Arc::strong_count(&self.0) - 1
    }
}

/// An async wait's other end: opened once, at a random moment, from a
/// sibling fiber or another thread.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
}

#[derive(Default)]
struct GateState {
    open: bool,
    waiter: Option<Callback<(), ()>>,
}

impl Gate {
    /// Registers the waiter, or resumes it at once if the gate is open.
    fn register(&self, cb: Callback<(), ()>) -> Option<bool> {
        let mut state = self.state.lock().unwrap();
        if state.open {
            drop(state);
            Some(cb.succeed(()))
        } else {
            state.waiter = Some(cb);
            None
        }
    }

    /// Opens the gate; resumes the waiter if there is one.
    fn open(&self) -> Option<bool> {
        let waiter = {
            let mut state = self.state.lock().unwrap();
            state.open = true;
            state.waiter.take()
        };
        waiter.map(|cb| cb.succeed(()))
    }

    /// Forgets the waiter (its wait was canceled).
    fn forget(&self) {
        let waiter = self.state.lock().unwrap().waiter.take();
        drop(waiter);
    }

    fn holds_a_waiter(&self) -> bool {
        self.state.lock().unwrap().waiter.is_some()
    }
}

type Gates = Arc<Vec<Gate>>;

/// The async wait for gate `i`; its cancel finalizer forgets the waiter.
fn wait_at(i: usize, gates: &Gates, ledger: &Ledger) -> IO<(), ()> {
    let (gates, ledger) = (gates.clone(), ledger.clone());
    IO::from_callback(move |cb| {
        ledger.push(Event::Registered(i));
        if let Some(accepted) = gates[i].register(cb) {
            ledger.push(Event::Delivered(i, accepted));
        }
        Some(IO::delay(move || {
            gates[i].forget();
            ledger.push(Event::AsyncFin(i));
        }))
    })
}

/// Opens gate `i` and records whether its waiter took the callback.
fn open_gate(i: usize, gates: &Gates, ledger: &Ledger) {
    if let Some(accepted) = gates[i].open() {
        ledger.push(Event::Delivered(i, accepted));
    }
}

/// The target program: the nest, outermost layer first.
fn target(nest: &Nest, unit: Duration, gates: &Gates, ledger: &Ledger, live: &Live) -> IO<u32, ()> {
    let sleep = move |units: u64| IO::sleep(unit * units as u32);
    let core_gate = nest.layers.len();
    let mut program: IO<u32, ()> = match nest.core {
        Core::Sleep(units) => sleep(units).map_to(7),
        Core::Async => wait_at(core_gate, gates, ledger).map_to(7),
    };
    for (i, layer) in nest.layers.iter().enumerate().rev() {
        let token = live.token();
        let inner = program.map(move |x| {
            let _alive = &token;
            x
        });
        program = match *layer {
            Layer::Bracket { acquire, release } => {
                let acquire = sleep(acquire).product_r(ledger.record(Event::Acquire(i)));
                let release = sleep(release).product_r(ledger.record(Event::Release(i)));
                IO::bracket(acquire, move |_| inner, move |()| release)
            }
            Layer::Uncancelable {
                poll,
                before,
                after,
            } => {
                let enter = ledger.record(Event::Enter(i));
                let exit = ledger.record(Event::Exit(i));
                IO::uncancelable(move |p| {
                    let mut body = if poll { p.apply(inner) } else { inner };
                    // No step at all for a 0 (the random nests' programs
                    // stay as they were).
                    if before > 0 {
                        body = sleep(before).product_r(body);
                    }
                    if after > 0 {
                        body = body.product_l(sleep(after));
                    }
                    enter.product_r(body).product_l(exit)
                })
            }
            Layer::OnCancel => ledger.record(Event::Enter(i)).product_r(
                inner
                    .product_l(ledger.record(Event::Done(i)))
                    .on_cancel(ledger.record(Event::Fin(i))),
            ),
            Layer::Guarantee { fin } => ledger
                .record(Event::Enter(i))
                .product_r(inner.guarantee(sleep(fin).product_r(ledger.record(Event::Fin(i))))),
            Layer::Async => wait_at(i, gates, ledger).product_r(inner),
            Layer::Sleep(units) => sleep(units).product_r(inner),
            Layer::Cede => IO::cede().product_r(inner),
        };
    }
    program
}

/// Waits where the nest says, then cancels `fiber` and joins it.
fn cancel_and_join(
    fiber: spindle_core::FiberHandle<u32, ()>,
    cancel_at: CancelAt,
    unit: Duration,
) -> IO<Outcome<u32, ()>, ()> {
    let wait = match cancel_at {
        CancelAt::Cedes(n) => IO::replicate(n as usize, IO::cede).void(),
        CancelAt::After(units) => IO::sleep(unit * units as u32),
    };
    wait.product_r(fiber.cancel()).product_r(fiber.join())
}

/// Checks the record of one run against the nest and the target's outcome.
fn check(
    nest: &Nest,
    seed: u64,
    ledger: &Ledger,
    gates: &Gates,
    live: &Live,
    outcome: &Outcome<u32, ()>,
) {
    let ctx = || format!("seed {seed}: {nest:?}, outcome {outcome:?}");
    let canceled = match outcome {
        Outcome::Canceled => true,
        Outcome::Succeeded(7) => false,
        other => panic!("unexpected outcome {other:?} ({})", ctx()),
    };
    let count = |e: Event| ledger.count(e);
    let mut acquired = 0;
    let mut released = 0;
    for (i, layer) in nest.layers.iter().enumerate() {
        match layer {
            Layer::Bracket { .. } => {
                let (acq, rel) = (count(Event::Acquire(i)), count(Event::Release(i)));
                assert!(acq <= 1, "acquired twice ({})", ctx());
                assert_eq!(
                    rel,
                    acq,
                    "layer {i}: released {rel} times after {acq} acquisitions ({})",
                    ctx()
                );
                acquired += acq;
                released += rel;
            }
            Layer::Uncancelable { poll, .. } => {
                let (entered, exited) = (count(Event::Enter(i)), count(Event::Exit(i)));
                assert!(entered <= 1 && exited <= entered, "layer {i} ({})", ctx());
                if !poll {
                    assert_eq!(
                        exited,
                        entered,
                        "layer {i}: an unpolled region was left early ({})",
                        ctx()
                    );
                } else if exited < entered {
                    assert!(
                        canceled,
                        "layer {i}: a polled region was left early without a cancel ({})",
                        ctx()
                    );
                }
            }
            Layer::OnCancel => {
                let entered = count(Event::Enter(i)) == 1;
                let done = count(Event::Done(i)) == 1;
                let fins = count(Event::Fin(i));
                let expected = usize::from(entered && !done && canceled);
                assert_eq!(
                    fins,
                    expected,
                    "layer {i}: on_cancel finalizer runs ({})",
                    ctx()
                );
            }
            Layer::Guarantee { .. } => {
                let entered = count(Event::Enter(i));
                assert_eq!(
                    count(Event::Fin(i)),
                    entered,
                    "layer {i}: guarantee finalizer runs ({})",
                    ctx()
                );
            }
            Layer::Async => check_wait(i, ledger, canceled, &ctx),
            Layer::Sleep(_) | Layer::Cede => {}
        }
    }
    if matches!(nest.core, Core::Async) {
        check_wait(nest.layers.len(), ledger, canceled, &ctx);
    }
    assert_eq!(acquired, released, "{}", ctx());
    if !canceled {
        assert_eq!(
            acquired,
            nest.layers
                .iter()
                .filter(|l| matches!(l, Layer::Bracket { .. }))
                .count(),
            "a fiber that completed acquired every resource ({})",
            ctx()
        );
    }
    for (i, gate) in gates.iter().enumerate() {
        assert!(
            !gate.holds_a_waiter(),
            "gate {i} still holds a callback ({})",
            ctx()
        );
    }
    assert_eq!(
        live.tokens(),
        0,
        "the target's program is still alive ({})",
        ctx()
    );
}

/// An async wait that registered was either resumed by its gate or, only
/// if the fiber was canceled, finalized exactly once; never both.
fn check_wait(i: usize, ledger: &Ledger, canceled: bool, ctx: &dyn Fn() -> String) {
    let registered = ledger.count(Event::Registered(i));
    let finalized = ledger.count(Event::AsyncFin(i));
    assert!(
        registered <= 1 && finalized <= registered,
        "wait {i} ({})",
        ctx()
    );
    if registered == 0 {
        return;
    }
    match ledger.delivered(i) {
        Some(true) => assert_eq!(finalized, 0, "wait {i}: resumed and finalized ({})", ctx()),
        _ => {
            assert_eq!(
                finalized,
                1,
                "wait {i}: neither resumed nor finalized ({})",
                ctx()
            );
            assert!(canceled, "wait {i}: finalized without a cancel ({})", ctx());
        }
    }
}

// ---------------------------------------------------------------------------
// Virtual time
// ---------------------------------------------------------------------------

/// The gates, opened in time order by one sibling fiber.
fn open_gates_in_time(nest: &Nest, gates: &Gates, ledger: &Ledger) -> IO<(), ()> {
    let mut order: Vec<(u64, usize)> = nest
        .gate_times
        .iter()
        .copied()
        .enumerate()
        .map(|(i, t)| (t, i))
        .collect();
    order.sort_unstable();
    let mut program = IO::unit();
    let mut now = 0;
    for (t, i) in order {
        let (gates, ledger) = (gates.clone(), ledger.clone());
        let step = IO::sleep(Duration::from_millis(t - now))
            .product_r(IO::delay(move || open_gate(i, &gates, &ledger)));
        program = program.product_r(step);
        now = t;
    }
    program
}

fn run_on_virtual_time(seed: u64) {
    let mut rng = Rng(seed);
    run_nest_on_virtual_time(&Nest::random(&mut rng), seed);
}

/// Runs `nest` on virtual time and checks its record; `seed` names the run
/// in a failure.
fn run_nest_on_virtual_time(nest: &Nest, seed: u64) {
    let nest = nest.clone();
    let unit = Duration::from_millis(1);
    let ledger = Ledger::default();
    let gates: Gates = Arc::new(
        (0..nest.gate_times.len())
            .map(|_| Gate::default())
            .collect(),
    );

    let live = Live::default();
    let fiber = target(&nest, unit, &gates, &ledger, &live);
    let opener = open_gates_in_time(&nest, &gates, &ledger);
    let cancel_at = nest.cancel_at;
    let program = fiber.start().flat_map(move |fiber| {
        opener.start().flat_map(move |opener| {
            cancel_and_join(fiber, cancel_at, unit)
                .flat_map(move |outcome| opener.join_void().map_to(outcome))
        })
    });

    let mut control = TestControl::execute(program);
    control.tick_all();
    assert!(!control.is_deadlocked(), "seed {seed}: deadlock ({nest:?})");
    let outcome = control
        .take_results()
        .unwrap_or_else(|| panic!("seed {seed}: no outcome ({nest:?})"))
        .succeeded()
        .unwrap_or_else(|| panic!("seed {seed}: the canceler failed ({nest:?})"));
    check(&nest, seed, &ledger, &gates, &live, &outcome);
    assert_eq!(
        control.next_interval(),
        None,
        "seed {seed}: a timer is left behind ({nest:?})"
    );
}

#[test]
fn canceling_at_a_random_virtual_moment_releases_every_resource_exactly_once() {
    for i in 0..VIRTUAL_ITERATIONS {
        run_on_virtual_time(0x5eed_0000 + i);
    }
}

/// Every millisecond of every shape's run: the seed of a failure is the
/// shape's number times 1,000 plus the millisecond.
#[test]
fn a_fiber_canceled_at_any_point_of_nested_regions_releases_every_acquired_resource_once() {
    let mut rng = Rng(0x5eed);
    let mut runs = 0u64;
    for shape in 0..SHAPES {
        let (mut nest, horizon) = Nest::nested_resources(&mut rng);
        for cancel_at in 0..=horizon {
            nest.cancel_at = CancelAt::After(cancel_at);
            run_nest_on_virtual_time(&nest, shape * 1_000 + cancel_at);
            runs += 1;
        }
    }
    assert!(runs >= 10 * SHAPES, "{runs} runs");
}

// ---------------------------------------------------------------------------
// Real threads
// ---------------------------------------------------------------------------

/// One unit of real time.
const REAL_UNIT: Duration = Duration::from_micros(20);

fn run_on_real_threads(seed: u64) {
    let mut rng = Rng(seed);
    let nest = Nest::random(&mut rng);
    let ledger = Ledger::default();
    let gates: Gates = Arc::new(
        (0..nest.gate_times.len())
            .map(|_| Gate::default())
            .collect(),
    );

    // Each gate opens from its own thread, after its time.
    let openers: Vec<_> = nest
        .gate_times
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            let (gates, ledger) = (gates.clone(), ledger.clone());
            thread::spawn(move || {
                thread::sleep(REAL_UNIT * t as u32);
                open_gate(i, &gates, &ledger);
            })
        })
        .collect();

    let live = Live::default();
    let fiber = target(&nest, REAL_UNIT, &gates, &ledger, &live);
    let cancel_at = nest.cancel_at;
    let program = fiber
        .start()
        .flat_map(move |fiber| cancel_and_join(fiber, cancel_at, REAL_UNIT));
    let outcome = SingleThreaded::new()
        .expect("an executor")
        .block_on(program)
        .expect("block_on")
        .succeeded()
        .unwrap_or_else(|| panic!("seed {seed}: the canceler failed ({nest:?})"));
    for opener in openers {
        opener.join().unwrap();
    }
    check(&nest, seed, &ledger, &gates, &live, &outcome);
}

#[test]
fn canceling_at_a_random_real_moment_with_callbacks_from_other_threads_releases_every_resource_exactly_once()
 {
    for i in 0..REAL_ITERATIONS {
        run_on_real_threads(0x7ea1_0000 + i);
    }
}
