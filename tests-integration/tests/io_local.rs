//! `IOLocal`, a value per fiber, on every executor: a fiber reads its
//! default until it sets a value; a child fiber (started by `start`,
//! `both`, `race`, `par_traverse`) begins with a copy of its parent's
//! values; what a child sets never reaches its parent or its siblings, and
//! what the parent sets after starting a child never reaches that child;
//! `local` puts the value before it back however its program ends; values
//! follow a fiber across suspensions and into IO blocks.

mod common;

use std::time::Duration;

use common::rt_test;
use spindle_core::{Deferred, Either, IO, IOLocal, Outcome};

type E = String;

/// Both values of two programs run one after the other.
trait Product<A> {
    fn product<B: Send + 'static>(self, second: IO<B, E>) -> IO<(A, B), E>;
}

impl<A: Send + 'static> Product<A> for IO<A, E> {
    fn product<B: Send + 'static>(self, second: IO<B, E>) -> IO<(A, B), E> {
        self.flat_map(move |a| second.map(move |b| (a, b)))
    }
}

rt_test! {
    fn a_fiber_that_never_set_a_local_reads_its_default() {
        let local = IOLocal::new(7u32);
        assert_eq!(run(local.get::<E>()), Outcome::Succeeded(7));
        assert_eq!(local.default_value(), &7);
    }

    fn a_value_set_is_read_back_and_reset_brings_the_default_back() {
        let local = IOLocal::new(String::from("default"));
        let (l1, l2, l3) = (local.clone(), local.clone(), local.clone());
        let program = local
            .set::<E>(String::from("set"))
            .product_r(l1.get())
            .flat_map(move |read| l2.reset().product_r(l3.get()).map(move |after| (read, after)));
        assert_eq!(
            run(program),
            Outcome::Succeeded((String::from("set"), String::from("default")))
        );
    }

    fn update_modify_and_get_and_set_read_the_current_value_and_replace_it() {
        let local = IOLocal::new(1u64);
        let (a, b, c, d) = (local.clone(), local.clone(), local.clone(), local.clone());
        let program = local
            .update::<E, _>(|x| x + 10)
            .product_r(a.modify(|x| (x * 2, x)))
            .flat_map(move |before_modify| {
                b.get_and_set(100)
                    .map(move |before_set| (before_modify, before_set))
            })
            .flat_map(move |(m, s)| c.get().map(move |now| (m, s, now)))
            .flat_map(move |(m, s, now)| d.reset().product_r(d.get()).map(move |reset| (m, s, now, reset)));
        assert_eq!(run(program), Outcome::Succeeded((11, 22, 100, 1)));
    }

    fn two_locals_of_different_types_hold_their_own_values() {
        let name = IOLocal::new(String::from("anonymous"));
        let count = IOLocal::new(0i32);
        let (n, c) = (name.clone(), count.clone());
        let program = name
            .set::<E>(String::from("ada"))
            .product_r(count.set(3))
            .product_r(n.get())
            .product(c.get());
        assert_eq!(run(program), Outcome::Succeeded((String::from("ada"), 3)));
    }

    fn a_child_fiber_starts_with_a_copy_of_its_parents_values() {
        let local = IOLocal::new(0u32);
        let (started, both_a, both_b, race, par) =
            (local.clone(), local.clone(), local.clone(), local.clone(), local.clone());
        let program = local.set::<E>(5).product_r(
            started
                .get::<E>()
                .start()
                .flat_map(|fiber| fiber.join_with_never())
                .product(both_a.get::<E>().both(both_b.get::<E>().product_l(IO::cede())))
                .product(race.get::<E>().race(IO::<(), E>::never()))
                .product(IO::par_traverse(vec![1u32, 2, 3], move |x| par.get().map(move |v| v * x))),
        );
        assert_eq!(
            run(program),
            Outcome::Succeeded((((5, (5, 5)), Either::Left(5)), vec![5, 10, 15]))
        );
    }

    fn what_a_child_sets_never_reaches_its_parent_or_its_siblings() {
        let local = IOLocal::new(String::from("parent"));
        let (a, a_read, b, after) = (local.clone(), local.clone(), local.clone(), local.clone());
        let children = a
            .set::<E>(String::from("first child"))
            .product_r(IO::cede())
            .product_r(a_read.get())
            .both(IO::cede().product_r(b.get()));
        let program = children.product(after.get());
        assert_eq!(
            run(program),
            Outcome::Succeeded((
                (String::from("first child"), String::from("parent")),
                String::from("parent")
            ))
        );
    }

    fn what_the_parent_sets_after_starting_a_child_never_reaches_that_child() {
        let local = IOLocal::new(1u32);
        let go = Deferred::<()>::new();
        let (child_local, parent_local, parent_read) = (local.clone(), local.clone(), local.clone());
        let (wait, release) = (go.clone(), go.clone());
        // The child reads only after the parent has set its new value.
        let child = wait.get::<E>().product_r(child_local.get());
        let program = child.start().flat_map(move |fiber| {
            parent_local
                .set(2)
                .product_r(release.complete::<E>(()))
                .product_r(fiber.join_with_never())
                .product(parent_read.get())
        });
        assert_eq!(run(program), Outcome::Succeeded((1, 2)));
    }

    fn local_puts_the_value_before_it_back_when_its_program_succeeds_or_fails() {
        let local = IOLocal::new(0u32);
        let (inside, set_inside, after_ok, scoped_err, after_err) =
            (local.clone(), local.clone(), local.clone(), local.clone(), local.clone());
        let program = local
            .set::<E>(1)
            .product_r(local.local(
                2,
                inside
                    .get::<E>()
                    // What the program sets inside the scope goes too.
                    .flat_map(move |seen| set_inside.set(3).map_to(seen)),
            ))
            .product(after_ok.get())
            .flat_map(move |(seen, after)| {
                scoped_err
                    .local(9, IO::<(), E>::raise_error(String::from("boom")))
                    .attempt()
                    .product(after_err.get())
                    .map(move |(failed, after_error)| (seen, after, failed, after_error))
            });
        assert_eq!(
            run(program),
            Outcome::Succeeded((2, 1, Err(String::from("boom")), 1))
        );
    }

    fn local_puts_the_value_before_it_back_when_its_program_is_canceled() {
        let local = IOLocal::new(String::from("default"));
        let after = local.clone();
        // The deadline cancels the scoped program on this same fiber; the
        // fiber goes on, and reads the default again.
        let program = local
            .local(String::from("scoped"), IO::<(), E>::never())
            .timeout_option(Duration::from_millis(10))
            .product(after.get());
        assert_eq!(
            run(program),
            Outcome::Succeeded((None, String::from("default")))
        );
    }

    fn a_value_follows_its_fiber_across_sleeps_and_cedes_and_into_io_blocks() {
        let local = IOLocal::new(0u64);
        let (in_block, after_sleep) = (local.clone(), local.clone());
        let program = local.set::<E>(42).product_r(IO::block(async move {
            IO::<(), E>::sleep(Duration::from_millis(1)).await?;
            IO::<(), E>::cede().await?;
            let read = in_block.get::<E>().await?;
            let again = after_sleep.get::<E>().await?;
            Ok((read, again))
        }));
        assert_eq!(run(program), Outcome::Succeeded((42, 42)));
    }
}
