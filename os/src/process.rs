//! Child processes as `IO` values: spawn a [`Command`] as a `Resource`
//! (the child is killed and reaped when the resource ends, however it
//! ends), its standard streams piped as streams, its exit status as an
//! `IO`, its output collected with a size limit.
//!
//! ```
//! use spindle_effect::prelude::*;
//! use spindle_effect::process::Command;
//! use spindle_effect::wstp::Runtime;
//!
//! let rt = Runtime::new()?;
//! let output = rt.block_on(Command::new("echo").arg("hello").output(1024))?.succeeded();
//! let output = output.expect("echo ran");
//! assert!(output.status.success());
//! assert_eq!(output.stdout, b"hello\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The protocol
//!
//! * **Spawn.** [`Command::spawn`] starts the child when the resource is
//!   acquired (the system's `fork`/`exec`, through std, on the fiber's
//!   thread: it does not wait for the child) and hands out a [`Child`].
//!   A program that does not exist, or that may not be run, fails the
//!   acquisition with the system's error kind (`NotFound`,
//!   `PermissionDenied`) and a [`SpawnError`] naming the program.
//! * **Wait.** [`Child::wait`] waits for the child's exit without
//!   blocking a thread: on Linux through the child's `pidfd` (readable
//!   once the child has exited), registered with the executor's I/O
//!   driver like a socket; elsewhere (or where `pidfd_open` is refused)
//!   on the blocking pool, with a `waitid` that does not reap, so that the
//!   child's pid cannot be reused while it is still ours. The status is
//!   kept: every `wait` of every clone returns it.
//! * **Release.** When the `Resource` ends (its use returned, failed, or
//!   was canceled), a child that has not exited is killed (`SIGKILL`) and
//!   reaped, masked: no child outlives its resource, and none is left a
//!   zombie. A use that wants the child to finish waits for it.
//! * **Pipes.** A piped standard stream is a non-blocking pipe registered
//!   with the executor's I/O driver ([`spindle_net::AsyncFd`]): reading a
//!   child's output never blocks a thread, on any std executor.
//!   [`ChildStdin`] closes its pipe when it is dropped (the child then
//!   reads end of input); [`ChildStdin::writes`] closes it at the end of
//!   the stream it writes.
//!
//! Design credits: tokio's `tokio::process` (pidfd and pipes on the
//! reactor) and fs2-io's `Processes` (a child as a resource); no code is
//! copied.

use std::error::Error;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, OnceLock};

use spindle_core::untraced::Untraced as _;
use spindle_core::{IO, Resource};
use spindle_net::AsyncFd;
use spindle_stream::{Chunk, InvalidArgument, Stream};

/// The operations as traces name them.
mod ops {
    use spindle_core::untraced::Op;

    pub(super) static SPAWN: Op = Op::new("Command::spawn");
    pub(super) static STATUS: Op = Op::new("Command::status");
    pub(super) static OUTPUT: Op = Op::new("Command::output");
    pub(super) static WAIT: Op = Op::new("Child::wait");
    pub(super) static TRY_WAIT: Op = Op::new("Child::try_wait");
    pub(super) static KILL: Op = Op::new("Child::kill");
    pub(super) static READ: Op = Op::new("ChildStdout::read");
    pub(super) static READ_TO_END: Op = Op::new("ChildStdout::read_to_end");
    pub(super) static WRITE_ALL: Op = Op::new("ChildStdin::write_all");
}

/// What becomes of a child's standard stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stdio {
    /// The parent's own stream.
    Inherit,
    /// Nothing (`/dev/null`).
    Null,
    /// A pipe to the parent: [`Child::stdin`], [`Child::stdout`],
    /// [`Child::stderr`].
    Piped,
}

impl Stdio {
    fn std(self) -> std::process::Stdio {
        match self {
            Stdio::Inherit => std::process::Stdio::inherit(),
            Stdio::Null => std::process::Stdio::null(),
            Stdio::Piped => std::process::Stdio::piped(),
        }
    }
}

/// A command to run: program, arguments, environment, working directory
/// and standard streams, as a value (std's `Command`'s builder, whose
/// [`spawn`](Command::spawn) is a `Resource`). The standard streams are
/// inherited unless set; [`output`](Command::output) pipes stdout and
/// stderr itself.
#[derive(Clone, Debug)]
pub struct Command {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, Option<OsString>)>,
    env_clear: bool,
    current_dir: Option<PathBuf>,
    stdin: Stdio,
    stdout: Stdio,
    stderr: Stdio,
}

impl Command {
    /// Runs `program` (a path, or a name looked up in `PATH`).
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        Command {
            program: program.as_ref().to_os_string(),
            args: Vec::new(),
            env: Vec::new(),
            env_clear: false,
            current_dir: None,
            stdin: Stdio::Inherit,
            stdout: Stdio::Inherit,
            stderr: Stdio::Inherit,
        }
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Sets an environment variable for the child.
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.env.push((
            key.as_ref().to_os_string(),
            Some(value.as_ref().to_os_string()),
        ));
        self
    }

    /// Sets environment variables for the child.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    /// Removes an environment variable from the child's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Self {
        self.env.push((key.as_ref().to_os_string(), None));
        self
    }

    /// Starts the child with an empty environment (then the variables set
    /// with [`env`](Command::env)).
    pub fn env_clear(&mut self) -> &mut Self {
        self.env_clear = true;
        self.env.clear();
        self
    }

    /// The child's working directory.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.current_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// What the child's standard input is.
    pub fn stdin(&mut self, stdio: Stdio) -> &mut Self {
        self.stdin = stdio;
        self
    }

    /// What the child's standard output is.
    pub fn stdout(&mut self, stdio: Stdio) -> &mut Self {
        self.stdout = stdio;
        self
    }

    /// What the child's standard error is.
    pub fn stderr(&mut self, stdio: Stdio) -> &mut Self {
        self.stderr = stdio;
        self
    }

    /// The program it runs.
    pub fn get_program(&self) -> &OsStr {
        &self.program
    }

    fn std(&self) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command.args(&self.args);
        if self.env_clear {
            command.env_clear();
        }
        for (key, value) in &self.env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        if let Some(dir) = &self.current_dir {
            command.current_dir(dir);
        }
        command
            .stdin(self.stdin.std())
            .stdout(self.stdout.std())
            .stderr(self.stderr.std());
        command
    }

    /// Starts the child as a `Resource`: its use gets the [`Child`]; when
    /// it ends, a child still running is killed and reaped (module doc).
    #[track_caller]
    pub fn spawn(&self) -> Resource<Child, io::Error> {
        let spawn = self.spawn_untraced().traced_as(&ops::SPAWN);
        Resource::make(spawn, |child: Child| child.kill_and_reap())
    }

    fn spawn_untraced(&self) -> IO<Child, io::Error> {
        let command = self.clone();
        IO::defer_untraced(move || {
            let program = command.program.clone();
            let started = command
                .std()
                .spawn()
                .map_err(|e| spawn_error(&program, e))
                .and_then(|child| Child::start(child, program));
            match started {
                Ok(child) => IO::pure(child),
                Err(e) => IO::raise_error_untraced(e),
            }
        })
    }

    /// Runs the command to its end, its standard streams as set (inherited
    /// by default), and returns its exit status.
    #[track_caller]
    pub fn status(&self) -> IO<ExitStatus, io::Error> {
        Resource::make(self.spawn_untraced(), |child: Child| child.kill_and_reap())
            .use_with(|child| child.wait_untraced())
            .traced_as(&ops::STATUS)
    }

    /// Runs the command to its end with its standard input empty
    /// (`/dev/null`, unless set) and its output and error piped, and
    /// collects both, at most `limit` bytes each. A child that writes more
    /// fails the program with an [`OutputTooLarge`] error (kind
    /// `InvalidData`), and is killed and reaped.
    #[track_caller]
    pub fn output(&self, limit: usize) -> IO<Output, io::Error> {
        let mut command = self.clone();
        if command.stdin == Stdio::Inherit {
            command.stdin = Stdio::Null;
        }
        command.stdout = Stdio::Piped;
        command.stderr = Stdio::Piped;
        Resource::make(command.spawn_untraced(), |child: Child| {
            child.kill_and_reap()
        })
        .use_with(move |child| {
            let (Some(stdout), Some(stderr)) = (child.stdout(), child.stderr()) else {
                return IO::raise_error_untraced(io::Error::other("the child's pipes are gone"));
            };
            stdout
                .read_limited(limit, "stdout")
                .both(stderr.read_limited(limit, "stderr"))
                .flat_map_untraced(move |(stdout, stderr)| {
                    child.wait_untraced().map_untraced(move |status| Output {
                        status,
                        stdout,
                        stderr,
                    })
                })
        })
        .traced_as(&ops::OUTPUT)
    }
}

/// What [`Command::output`] collected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// How the child ended (`status.code()`, or on Unix the signal that
    /// killed it: `std::os::unix::process::ExitStatusExt::signal`).
    pub status: ExitStatus,
    /// Everything it wrote to its standard output.
    pub stdout: Vec<u8>,
    /// Everything it wrote to its standard error.
    pub stderr: Vec<u8>,
}

/// The payload of a spawn's error: the program that could not be started
/// (the outer `io::Error` keeps the system's kind: `NotFound`,
/// `PermissionDenied`, ...).
#[derive(Debug)]
pub struct SpawnError {
    program: OsString,
    source: io::Error,
}

impl SpawnError {
    /// The program.
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The `SpawnError` inside `error`, if a spawn made it.
    pub fn of(error: &io::Error) -> Option<&SpawnError> {
        error.get_ref()?.downcast_ref()
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "spawn {}: {}",
            Path::new(&self.program).display(),
            self.source
        )
    }
}

impl Error for SpawnError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.source)
    }
}

fn spawn_error(program: &OsStr, source: io::Error) -> io::Error {
    io::Error::new(
        source.kind(),
        SpawnError {
            program: program.to_os_string(),
            source,
        },
    )
}

/// The payload of [`Command::output`]'s error when the child wrote more
/// than the limit to one of its streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputTooLarge {
    /// `"stdout"` or `"stderr"`.
    pub stream: &'static str,
    /// The limit, in bytes.
    pub limit: usize,
}

impl fmt::Display for OutputTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the child's {} passed the limit of {} bytes",
            self.stream, self.limit
        )
    }
}

impl Error for OutputTooLarge {}

/// How the exit of a child is waited for.
enum Exit {
    /// Its `pidfd`, readable once it has exited (Linux).
    #[cfg(target_os = "linux")]
    PidFd(AsyncFd<std::fs::File>),
    /// A `waitid` that does not reap, on the blocking pool.
    Blocking,
}

struct ChildInner {
    pid: u32,
    program: OsString,
    /// std's child: reaps (`try_wait`, which keeps the status) and kills.
    child: Mutex<std::process::Child>,
    /// The exit status, once reaped.
    status: OnceLock<ExitStatus>,
    exit: Exit,
    stdin: Mutex<Option<ChildStdin>>,
    stdout: Mutex<Option<ChildStdout>>,
    stderr: Mutex<Option<ChildStdout>>,
}

/// A running (or exited) child process: a cheap handle (clones share it).
/// It is killed and reaped when the `Resource` that made it ends.
#[derive(Clone)]
pub struct Child {
    inner: Arc<ChildInner>,
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child")
            .field("pid", &self.inner.pid)
            .field("program", &self.inner.program)
            .field("status", &self.inner.status.get())
            .finish()
    }
}

/// A `std::fs::File` over a pipe's descriptor (the type [`AsyncFd`]
/// registers).
fn pipe_file(fd: impl Into<OwnedFd>) -> std::fs::File {
    std::fs::File::from(fd.into())
}

impl Child {
    /// Registers the pipes and the exit of a child just spawned, on the
    /// running executor's driver (a call inside a step); if that fails the
    /// child is killed and reaped, and the pipes closed.
    fn start(mut child: std::process::Child, program: OsString) -> io::Result<Child> {
        let pid = child.id();
        let pipes = (
            child.stdin.take().map(pipe_file),
            child.stdout.take().map(pipe_file),
            child.stderr.take().map(pipe_file),
        );
        let registered = (|| {
            let (stdin, stdout, stderr) = pipes;
            Ok::<_, io::Error>((
                register_optional(stdin)?,
                register_optional(stdout)?,
                register_optional(stderr)?,
            ))
        })();
        let (stdin, stdout, stderr) = match registered {
            Ok(pipes) => pipes,
            Err(e) => {
                // Not ours to run any more: killed, and reaped (the moment
                // a killed child takes to exit).
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        Ok(Child {
            inner: Arc::new(ChildInner {
                pid,
                program,
                child: Mutex::new(child),
                status: OnceLock::new(),
                exit: exit_of(pid),
                stdin: Mutex::new(stdin.map(|fd| ChildStdin { fd })),
                stdout: Mutex::new(stdout.map(|fd| ChildStdout { fd })),
                stderr: Mutex::new(stderr.map(|fd| ChildStdout { fd })),
            }),
        })
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.inner.pid
    }

    /// Its standard input, if piped; once (later calls return `None`).
    pub fn stdin(&self) -> Option<ChildStdin> {
        lock(&self.inner.stdin).take()
    }

    /// Its standard output, if piped; once.
    pub fn stdout(&self) -> Option<ChildStdout> {
        lock(&self.inner.stdout).take()
    }

    /// Its standard error, if piped; once (the same reader type as
    /// standard output).
    pub fn stderr(&self) -> Option<ChildStdout> {
        lock(&self.inner.stderr).take()
    }

    /// Waits for the child to exit, without blocking a thread (module
    /// doc), and returns its status (every later wait returns it too).
    #[track_caller]
    pub fn wait(&self) -> IO<ExitStatus, io::Error> {
        self.wait_untraced().traced_as(&ops::WAIT)
    }

    fn wait_untraced(&self) -> IO<ExitStatus, io::Error> {
        let inner = self.inner.clone();
        if let Some(status) = inner.status.get() {
            return IO::pure(*status);
        }
        match &inner.exit {
            #[cfg(target_os = "linux")]
            Exit::PidFd(fd) => {
                let reaper = inner.clone();
                fd.read_with_untraced(move |_| match reaper.try_reap()? {
                    Some(status) => Ok(status),
                    None => Err(io::ErrorKind::WouldBlock.into()),
                })
            }
            Exit::Blocking => {
                let pid = inner.pid;
                IO::try_blocking_untraced(move || wait_without_reaping(pid)).flat_map_untraced(
                    move |()| match inner.try_reap() {
                        Ok(Some(status)) => IO::pure(status),
                        Ok(None) => IO::raise_error_untraced(io::Error::other(
                            "the child exited but could not be reaped",
                        )),
                        Err(e) => IO::raise_error_untraced(e),
                    },
                )
            }
        }
    }

    /// Its exit status if it has exited (reaping it), `None` if it runs.
    #[track_caller]
    pub fn try_wait(&self) -> IO<Option<ExitStatus>, io::Error> {
        let inner = self.inner.clone();
        IO::defer_untraced(move || match inner.try_reap() {
            Ok(status) => IO::pure(status),
            Err(e) => IO::raise_error_untraced(e),
        })
        .traced_as(&ops::TRY_WAIT)
    }

    /// Sends it `SIGKILL` (nothing to do if it has exited). Its status is
    /// then what [`wait`](Child::wait) returns.
    #[track_caller]
    pub fn kill(&self) -> IO<(), io::Error> {
        let inner = self.inner.clone();
        IO::defer_untraced(move || match inner.kill() {
            Ok(()) => IO::unit(),
            Err(e) => IO::raise_error_untraced(e),
        })
        .traced_as(&ops::KILL)
    }

    /// The `Resource`'s release: kill if running, then reap.
    fn kill_and_reap(&self) -> IO<(), io::Error> {
        let inner = self.inner.clone();
        let child = self.clone();
        IO::defer_untraced(move || match inner.kill() {
            Ok(()) => child.wait_untraced().map_untraced(|_| ()),
            Err(e) => IO::raise_error_untraced(e),
        })
    }
}

impl ChildInner {
    /// Reaps the child if it has exited, keeping its status.
    fn try_reap(&self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status.get() {
            return Ok(Some(*status));
        }
        let status = lock(&self.child).try_wait()?;
        if let Some(status) = status {
            let _ = self.status.set(status);
        }
        Ok(status)
    }

    /// `SIGKILL`, unless it has been reaped (its pid may be reused then).
    fn kill(&self) -> io::Result<()> {
        let mut child = lock(&self.child);
        if self.status.get().is_some() {
            return Ok(());
        }
        match child.try_wait()? {
            Some(status) => {
                let _ = self.status.set(status);
                Ok(())
            }
            None => child.kill(),
        }
    }
}

/// The lock of a child's state (a panic while holding it cannot leave it
/// inconsistent: every section is one call).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers a pipe, if there is one.
fn register_optional(file: Option<std::fs::File>) -> io::Result<Option<AsyncFd<std::fs::File>>> {
    file.map(AsyncFd::register_here).transpose()
}

/// How the exit of the child `pid` will be waited for.
fn exit_of(pid: u32) -> Exit {
    #[cfg(target_os = "linux")]
    {
        let pidfd = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .and_then(|pid| {
                rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::NONBLOCK).ok()
            })
            .and_then(|fd| AsyncFd::register_here(std::fs::File::from(fd)).ok());
        match pidfd {
            Some(fd) => Exit::PidFd(fd),
            // No pidfd (an old kernel, a sandbox), or one the driver cannot
            // watch: the blocking wait.
            None => Exit::Blocking,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        Exit::Blocking
    }
}

/// Blocks until the child `pid` has exited, leaving it to be reaped.
fn wait_without_reaping(pid: u32) -> io::Result<()> {
    use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::other("a child's pid out of range"))?;
    loop {
        match waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// The parent's end of a child's standard output or error: a
/// non-blocking pipe on the executor's I/O driver. Dropping it closes the
/// pipe (a child that writes more then gets `SIGPIPE`).
#[derive(Clone, Debug)]
pub struct ChildStdout {
    fd: AsyncFd<std::fs::File>,
}

impl ChildStdout {
    /// At most `max` bytes, as soon as some are there; none at the end
    /// (the child closed it, or exited).
    #[track_caller]
    pub fn read(&self, max: usize) -> IO<Vec<u8>, io::Error> {
        self.read_untraced(max).traced_as(&ops::READ)
    }

    fn read_untraced(&self, max: usize) -> IO<Vec<u8>, io::Error> {
        self.fd.read_with_untraced(move |mut file| {
            let mut bytes = vec![0; max];
            let n = file.read(&mut bytes)?;
            bytes.truncate(n);
            Ok(bytes)
        })
    }

    /// Everything until the end, at most `limit` bytes (more fails with
    /// [`OutputTooLarge`], kind `InvalidData`).
    #[track_caller]
    pub fn read_to_end(&self, limit: usize) -> IO<Vec<u8>, io::Error> {
        self.read_limited(limit, "output")
            .traced_as(&ops::READ_TO_END)
    }

    fn read_limited(&self, limit: usize, stream: &'static str) -> IO<Vec<u8>, io::Error> {
        let reader = self.clone();
        IO::tail_rec_untraced(Vec::new(), move |mut got: Vec<u8>| {
            // One byte past the limit tells "more" from "exactly the limit".
            let room = limit
                .saturating_add(1)
                .saturating_sub(got.len())
                .min(64 * 1024);
            reader
                .read_untraced(room)
                .map_untraced(move |bytes| {
                    if bytes.is_empty() {
                        return Ok(std::ops::ControlFlow::Break(got));
                    }
                    got.extend_from_slice(&bytes);
                    if got.len() > limit {
                        Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            OutputTooLarge { stream, limit },
                        ))
                    } else {
                        Ok(std::ops::ControlFlow::Continue(got))
                    }
                })
                .flat_map_untraced(|step| match step {
                    Ok(step) => IO::pure(step),
                    Err(e) => IO::raise_error_untraced(e),
                })
        })
    }

    /// The bytes, a chunk per read of at most `max` bytes (above 0), until
    /// the end.
    pub fn reads(&self, max: usize) -> Result<Stream<u8, io::Error>, InvalidArgument> {
        let max = InvalidArgument::above_zero("ChildStdout::reads", "a read size above 0", max)?;
        Ok(Stream::unfold_chunk_eval(self.clone(), move |reader| {
            reader.read_untraced(max).map_untraced(move |bytes| {
                if bytes.is_empty() {
                    None
                } else {
                    Some((Chunk::from(bytes), reader))
                }
            })
        }))
    }
}

/// The parent's end of a child's standard input: a non-blocking pipe on
/// the executor's I/O driver. Dropping it (and the programs made from
/// it) closes the pipe: the child reads end of input.
#[derive(Debug)]
pub struct ChildStdin {
    fd: AsyncFd<std::fs::File>,
}

impl ChildStdin {
    /// Writes all of `bytes` (a child that has closed its input, or
    /// exited, fails it with `BrokenPipe`).
    #[track_caller]
    pub fn write_all(&self, bytes: impl Into<Vec<u8>>) -> IO<(), io::Error> {
        write_all_to(&self.fd, bytes.into()).traced_as(&ops::WRITE_ALL)
    }

    /// A pipe: writes every chunk of `bytes`, emitting a unit per chunk,
    /// and closes the child's input when the stream ends (the stream holds
    /// the pipe until then).
    pub fn writes(self, bytes: Stream<u8, io::Error>) -> Stream<(), io::Error> {
        let fd = self.fd;
        bytes
            .chunks()
            .eval_map(move |chunk| write_all_to(&fd, chunk.into_vec()))
    }
}

/// Writes all of `bytes` to a pipe.
fn write_all_to(fd: &AsyncFd<std::fs::File>, bytes: Vec<u8>) -> IO<(), io::Error> {
    let mut written = 0;
    fd.write_with_untraced(move |mut file| {
        while written < bytes.len() {
            match file.write(&bytes[written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })
}
