// A program's closures are `'static` (a fiber may outlive the caller and
// run on another thread): a borrow of a local cannot go into one. Move an
// owned value (or a clone) into the closure instead.
use spindle_effect::IO;

fn main() {
    let names = vec!["ada".to_string(), "bob".to_string()];
    let first = &names[0];
    let child: IO<usize, ()> = IO::delay(move || first.len());
    let _fiber = child.start::<()>();
}
