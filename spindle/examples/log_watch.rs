//! A log watcher: follows a log file as it grows, runs a command for every
//! new line that matches a pattern (at most `concurrency` commands at
//! once), and reloads its settings on SIGHUP, on every std executor.
//!
//! ```text
//! log_watch [--executor wstp|batching|tokio|single] [--workers N]
//!           [--flavor multi-thread|current-thread] [--mode batching|macrotask]
//!           [--batch-size N] --log PATH --settings PATH [--from-start]
//! ```
//!
//! `cargo run -p spindle-effect --features full --example log_watch -- --log app.log --settings watch.conf`,
//! then `echo "ERROR disk full" >> app.log`, edit `watch.conf` and
//! `kill -HUP <pid>`.
//!
//! * The executor flags are `hello_http`'s (`examples/support/executor.rs`).
//! * `--log`: the file to follow. Lines appended from the start on are
//!   read (`--from-start`: the lines already there too). A file cut
//!   shorter (rotated by copy and truncate) is followed from its start.
//! * `--settings`: `key = value` lines (`#` starts a comment):
//!   `pattern` (required: a line matches when it contains it), `command`
//!   (required: run by `sh -c` for each matching line, which it gets as
//!   `$1` and in the environment variable `LOG_LINE`), `concurrency`
//!   (default 4: how many commands run at once; read at start only).
//!
//! The first line on stdout is exactly `watching <path>`. For every
//! command that ends, a line `ran (<status>): <line>`; after a reload,
//! `settings reloaded: pattern <pattern>`; settings that cannot be read
//! or parsed on SIGHUP are reported on stderr and the old ones kept.
//! SIGINT and SIGTERM end the program (`app::run`): the commands still
//! running are killed and reaped, the file closed, the handlers removed.
//!
//! # The program: three resources and two streams
//!
//! ```text
//! fs::tail(log)                        the bytes appended, for ever
//!   -> text::utf8_decode -> text::lines(64 KiB)
//!   -> eval_map(with the current settings)    a SignallingRef read per line
//!   -> filter(matches the pattern)
//!   -> par_eval_map_unordered(concurrency, run the command)
//!   -> eval_map(print what it did)
//!   concurrently
//! signal::signals([SIGHUP]) -> eval_map(reload the settings into the ref)
//! ```
//!
//! A command is a `process::Command`'s `status()`: its child is killed
//! and reaped when its program is canceled, so stopping the watcher
//! leaves no child behind.

#[path = "support/executor.rs"]
pub(crate) mod executor;

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use spindle_effect::IO;
use spindle_effect::fs;
use spindle_effect::process::Command;
use spindle_effect::signal::{self, Signal};
use spindle_effect::stdio;
use spindle_effect::stream::{SignallingRef, Stream, text};

use executor::{Executor, ExecutorFlags};

/// The longest log line read, in bytes.
const MAX_LINE: usize = 64 * 1024;
/// How often the log is looked at once its end is reached.
const POLL: Duration = Duration::from_millis(100);
/// How much the log is read at once.
const CHUNK: usize = 64 * 1024;
/// Commands at once, when the settings do not say.
const DEFAULT_CONCURRENCY: usize = 4;

/// The settings file, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// A line matches when it contains this.
    pub(crate) pattern: String,
    /// What `sh -c` runs for a matching line.
    pub(crate) command: String,
    /// How many commands run at once (above 0).
    pub(crate) concurrency: usize,
}

/// Parses a settings file: `key = value` lines, `#` comments, blank lines.
pub(crate) fn parse_settings(text: &str) -> Result<Settings, String> {
    let (mut pattern, mut command, mut concurrency) = (None, None, DEFAULT_CONCURRENCY);
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {}: expected `key = value`", number + 1));
        };
        let value = value.trim().to_string();
        match key.trim() {
            "pattern" if !value.is_empty() => pattern = Some(value),
            "pattern" => return Err(format!("line {}: an empty pattern", number + 1)),
            "command" => command = Some(value),
            "concurrency" => {
                concurrency = value
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n > 0)
                    .ok_or_else(|| {
                        format!(
                            "line {}: concurrency {value:?} is not a number above 0",
                            number + 1
                        )
                    })?;
            }
            other => return Err(format!("line {}: unknown setting {other:?}", number + 1)),
        }
    }
    Ok(Settings {
        pattern: pattern.ok_or("no `pattern` setting")?,
        command: command.ok_or("no `command` setting")?,
        concurrency,
    })
}

/// The command line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Options {
    /// The executor to run on.
    pub(crate) executor: Executor,
    /// The file to follow.
    pub(crate) log: PathBuf,
    /// The settings file.
    pub(crate) settings: PathBuf,
    /// Read the lines already in the log too.
    pub(crate) from_start: bool,
}

/// Parses the arguments after the program name; `Err("")` for `--help`.
pub(crate) fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut executor = ExecutorFlags::default();
    let (mut log, mut settings, mut from_start) = (None, None, false);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        if executor.take(&flag, &mut value)? {
            continue;
        }
        match flag.as_str() {
            "--log" => log = Some(PathBuf::from(value()?)),
            "--settings" => settings = Some(PathBuf::from(value()?)),
            "--from-start" => from_start = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        executor: executor.resolve()?,
        log: log.ok_or("--log is required")?,
        settings: settings.ok_or("--settings is required")?,
        from_start,
    })
}

/// Reads and parses the settings file (an error of kind `InvalidData`
/// that says what is wrong with it).
fn load(path: PathBuf) -> IO<Settings, io::Error> {
    fs::read_to_string(&path).flat_map(move |text| match parse_settings(&text) {
        Ok(settings) => IO::pure(settings),
        Err(why) => IO::raise_error(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}", path.display()),
        )),
    })
}

/// Runs the command of `settings` for `line`; what to print.
fn run_command(settings: Settings, line: String) -> IO<String, io::Error> {
    Command::new("sh")
        .arg("-c")
        .arg(&settings.command)
        .arg("log_watch")
        .arg(&line)
        .env("LOG_LINE", &line)
        .status()
        .map(move |status| format!("ran ({status}): {line}\n"))
        // A command that cannot be started is reported, not fatal.
        .handle_error_with(|e| IO::pure(format!("could not run the command: {e}\n")))
}

/// The watcher, once its first settings are read.
fn watch(options: Options, first: Settings) -> IO<(), io::Error> {
    let settings = SignallingRef::new(first.clone());
    let current = settings.clone();
    let log = options.log.clone();
    let start = if options.from_start {
        IO::pure(0)
    } else {
        fs::metadata(&log).map(|m| m.len())
    };
    let settings_path = options.settings.clone();
    start.flat_map(move |offset| {
        let bytes = match fs::tail(&log, offset, CHUNK, POLL) {
            Ok(bytes) => bytes,
            Err(refused) => return IO::raise_error(io::Error::other(refused)),
        };
        let commands = text::lines(text::utf8_decode(bytes), MAX_LINE)
            .eval_map(move |line| current.get().map(move |settings| (settings, line)))
            .filter(|(settings, line): &(Settings, String)| line.contains(&settings.pattern))
            .par_eval_map_unordered(first.concurrency, |(settings, line)| {
                run_command(settings, line)
            });
        let commands = match commands {
            Ok(commands) => commands,
            Err(refused) => return IO::raise_error(io::Error::other(refused)),
        };
        let reloads = match signal::signals(&[Signal::SIGHUP]) {
            Ok(hangups) => {
                hangups.eval_map(move |_| reload(settings_path.clone(), settings.clone()))
            }
            Err(e) => Stream::raise_error(e),
        };
        let announce = stdio::stdout_write_all(format!("watching {}\n", log.display()));
        announce.product_r(
            commands
                .eval_map(stdio::stdout_write_all)
                .concurrently(reloads)
                .compile()
                .drain(),
        )
    })
}

/// Reads the settings again into `settings`; bad ones are reported and
/// the old ones kept.
fn reload(path: PathBuf, settings: SignallingRef<Settings>) -> IO<(), io::Error> {
    load(path).attempt().flat_map(move |loaded| match loaded {
        Ok(new) => {
            let message = format!("settings reloaded: pattern {}\n", new.pattern);
            settings
                .set(new)
                .product_r(stdio::stdout_write_all(message))
        }
        Err(e) => stdio::stderr_write_all(format!("settings not reloaded: {e}\n")),
    })
}

/// Runs the watcher with `args` (the command line after the program name);
/// the process exit code.
pub fn run(args: impl Iterator<Item = String>) -> ExitCode {
    let options = match parse_options(args) {
        Ok(options) => options,
        Err(why) => {
            if why.is_empty() {
                println!(
                    "usage: log_watch [executor flags] --log PATH --settings PATH [--from-start]"
                );
                return ExitCode::SUCCESS;
            }
            eprintln!("log_watch: {why}");
            return ExitCode::from(2);
        }
    };
    let executor = options.executor;
    let main = load(options.settings.clone()).flat_map(move |first| watch(options, first));
    executor.run(main)
}

fn main() -> ExitCode {
    run(std::env::args().skip(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_with_their_defaults_and_comments() {
        let settings =
            parse_settings("# watch\npattern = ERROR\ncommand = echo \"$1\"  \n").unwrap();
        assert_eq!(
            settings,
            Settings {
                pattern: "ERROR".into(),
                command: "echo \"$1\"".into(),
                concurrency: DEFAULT_CONCURRENCY,
            }
        );
    }

    #[test]
    fn bad_settings_are_refused_with_the_line_that_is_wrong() {
        assert_eq!(
            parse_settings("pattern = x\ncommand = y\nconcurrency = 0\n"),
            Err("line 3: concurrency \"0\" is not a number above 0".into())
        );
        assert_eq!(
            parse_settings("command = y\n"),
            Err("no `pattern` setting".into())
        );
        assert_eq!(
            parse_settings("pattern x\n"),
            Err("line 1: expected `key = value`".into())
        );
        assert_eq!(
            parse_settings("colour = red\n"),
            Err("line 1: unknown setting \"colour\"".into())
        );
    }

    #[test]
    fn the_log_and_the_settings_are_required_on_the_command_line() {
        let args = |a: &[&str]| {
            a.iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .into_iter()
        };
        assert_eq!(
            parse_options(args(&["--log", "a"])),
            Err("--settings is required".into())
        );
        let options =
            parse_options(args(&["--log", "a", "--settings", "b", "--from-start"])).unwrap();
        assert!(options.from_start);
        assert_eq!(options.log, PathBuf::from("a"));
    }
}
