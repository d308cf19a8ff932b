// An IO block is `Send` (a fiber may resume on another worker thread
// after an await), so a value that is not `Send` (`Rc`, `RefCell` guards,
// `MutexGuard`) cannot be held across an `.await`. Use `Arc`, or drop the
// value before the await.
use std::rc::Rc;

use spindle_effect::IO;

fn main() {
    let _program: IO<usize, ()> = IO::block(async {
        let shared = Rc::new(vec![1, 2, 3]);
        IO::<(), ()>::cede().await?;
        Ok(shared.len())
    });
}
