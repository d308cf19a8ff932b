//! `Console`: standard input, output and error as programs (Cats Effect
//! std's `Console`), with `std`.
//!
//! Every operation runs through [`IO::try_blocking`]: a write to a full
//! pipe or a read from a terminal blocks the thread, and must not block a
//! fiber's worker. Failures are `std::io::Error` values, never panics
//! (`print!` panics when stdout is closed; `Console` does not).
//!
//! Each stream sits behind its own lock, held for one whole operation, so
//! the text of one `println` is never interleaved with another's, and
//! every write is flushed before the program completes (what was printed
//! is visible when the next step runs).
//!
//! [`Console::stdio`] is the process's streams; [`Console::from_parts`]
//! takes any reader and writers (for tests, or a socket). `read_line`
//! produces the line without its line ending (`\n` or `\r\n`) and fails
//! with [`ErrorKind::UnexpectedEof`](std::io::ErrorKind::UnexpectedEof)
//! at the end of input, as Cats Effect's `readLine` raises
//! `EOFException`.
//!
//! Left out, compared with Cats Effect: a `Show`-like type class (text is
//! anything [`Display`](core::fmt::Display)) and a charset parameter
//! (Rust strings are UTF-8; input that is not is an `InvalidData` error).

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use core::fmt;
use std::io::{self, BufRead, Write};

use crate::io::IO;
use crate::sync::{Arc, Mutex};

enum Input {
    Stdin(io::Stdin),
    Reader(Box<dyn BufRead + Send>),
}

type Output = Mutex<Box<dyn Write + Send>>;

struct Streams {
    input: Mutex<Input>,
    out: Output,
    err: Output,
}

/// Standard input, output and error (or stand-ins) as programs.
///
/// ```
/// use spindle_effect::prelude::*;
/// use spindle_effect::{Console, wstp::Runtime};
/// use std::io::Cursor;
///
/// let console = Console::from_parts(Cursor::new("Ada\n"), std::io::sink(), std::io::sink());
/// let c = console.clone();
/// let io: IO<String, std::io::Error> = console
///     .print("name? ")
///     .product_r(console.read_line())
///     .flat_map(move |name| c.println(format!("hello, {name}")).map_to(name));
/// assert_eq!(Runtime::new()?.block_on(io)?.succeeded(), Some("Ada".to_string()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Console {
    streams: Arc<Streams>,
}

impl fmt::Debug for Console {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stdio = matches!(*self.streams.input.lock(), Input::Stdin(_));
        f.debug_struct("Console").field("stdio", &stdio).finish()
    }
}

impl Console {
    /// The process's standard input, output and error.
    pub fn stdio() -> Console {
        Console::with_input(
            Input::Stdin(io::stdin()),
            Box::new(io::stdout()),
            Box::new(io::stderr()),
        )
    }

    /// A console over the given input and outputs.
    pub fn from_parts(
        input: impl BufRead + Send + 'static,
        out: impl Write + Send + 'static,
        err: impl Write + Send + 'static,
    ) -> Console {
        Console::with_input(Input::Reader(Box::new(input)), Box::new(out), Box::new(err))
    }

    fn with_input(input: Input, out: Box<dyn Write + Send>, err: Box<dyn Write + Send>) -> Console {
        Console {
            streams: Arc::new(Streams {
                input: Mutex::new(input),
                out: Mutex::new(out),
                err: Mutex::new(err),
            }),
        }
    }

    /// Writes `text` to one output and flushes it, on a blocking thread.
    fn write(&self, to_err: bool, text: String) -> IO<(), io::Error> {
        let streams = self.streams.clone();
        IO::try_blocking(move || {
            let output = if to_err { &streams.err } else { &streams.out };
            let mut output = output.lock();
            output.write_all(text.as_bytes())?;
            output.flush()
        })
    }

    /// Writes `text` to the output.
    pub fn print(&self, text: impl fmt::Display) -> IO<(), io::Error> {
        self.write(false, text.to_string())
    }

    /// Writes `text` and a line ending to the output.
    pub fn println(&self, text: impl fmt::Display) -> IO<(), io::Error> {
        let mut line = text.to_string();
        line.push('\n');
        self.write(false, line)
    }

    /// Writes `text` to the error output.
    pub fn error(&self, text: impl fmt::Display) -> IO<(), io::Error> {
        self.write(true, text.to_string())
    }

    /// Writes `text` and a line ending to the error output.
    pub fn errorln(&self, text: impl fmt::Display) -> IO<(), io::Error> {
        let mut line = text.to_string();
        line.push('\n');
        self.write(true, line)
    }

    /// Reads one line of input, without its line ending; fails with
    /// `UnexpectedEof` at the end of input. The read blocks a blocking
    /// thread, not the fiber's worker, and cannot be interrupted: a fiber
    /// canceled meanwhile finalizes once the line arrives (as
    /// [`IO::blocking`] documents).
    pub fn read_line(&self) -> IO<String, io::Error> {
        let streams = self.streams.clone();
        IO::try_blocking(move || {
            let mut line = String::new();
            let read = match &mut *streams.input.lock() {
                Input::Stdin(stdin) => stdin.read_line(&mut line)?,
                Input::Reader(reader) => reader.read_line(&mut line)?,
            };
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "end of input before a line",
                ));
            }
            if line.ends_with('\n') {
                line.pop();
                if line.ends_with('\r') {
                    line.pop();
                }
            }
            Ok(line)
        })
    }
}
