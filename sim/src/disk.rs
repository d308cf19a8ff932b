//! The simulated disk: one in-memory file system per host, under
//! spindle-os's `fs` functions and `File`, with the losses of a crash and
//! injected I/O errors drawn from the run's seed. No system file is
//! touched.
//!
//! # The disk of a host
//!
//! Every host (the main program's `"main"` and each [`Run::host`]) has
//! a disk of its own, empty when the run starts, with only its root
//! directory `/`; a relative path is relative to the root (`"data/log"`
//! is `/data/log`). The host's fibers reach it through their I/O driver
//! ([`IoDriver::disk`](spindle_net::driver::IoDriver::disk)), so a
//! program's `fs::write`, `File::open`, `fs::read_dir`, ... run on it
//! unchanged, with the semantics of a local Unix file system: the same
//! error kinds (`NotFound` naming the path, `AlreadyExists`,
//! `DirectoryNotEmpty`, ...), renames that replace a file, hard links,
//! files that live on while open after their last name is gone. A
//! directory lists its entries in the order of their names. A few
//! operations cannot run on it and fail with an `Unsupported` error
//! (spindle-os's `fs` module documentation lists them: `metadata`,
//! symbolic links, permissions, `canonicalize`, temporary files).
//!
//! # What a crash keeps
//!
//! A disk outlives its host's crashes: the restarted host finds the files
//! it wrote. But a file system keeps in memory what a program wrote until
//! it is *synced*, and a crash loses what was not. The model:
//!
//! * Each file has its contents and its *durable* contents. A file's
//!   `File::sync_all` or `File::sync_data` makes its contents durable.
//!   Nothing else does: **a whole-file `fs::write`, `fs::append`, a
//!   `File`'s writes, `set_len` are not durable until the file is synced**
//!   (as with `std::fs::write`, which does not sync either).
//! * The names are durable at once: creating, removing and renaming files
//!   and directories survive a crash (as on a file system that journals
//!   its metadata in order; a created file that was never synced survives
//!   as an empty file, or with what the crash kept of it).
//! * When the host crashes, every file written since its last sync keeps
//!   its new contents up to a point drawn from the seed (anywhere from
//!   where they first differ from the durable contents to their end) and
//!   the durable contents after it: all of the unsynced writes are lost,
//!   or a prefix of them survives, or all of them. A file whose last name
//!   was removed is gone. Handles opened before the crash fail from then
//!   on.
//!
//! So a program that acknowledges a write before it synced it can lose an
//! acknowledged write when its host crashes: the crash-consistency bugs a
//! test can then find.
//!
//! # Injected errors
//!
//! With [`DiskConfig::errors`] above 0, each disk operation (each call of
//! spindle-os on the disk: an open, a read, a write, a sync, a rename, ...)
//! fails with probability `p` with an `io::Error` of kind `Other`
//! (an [`InjectedFault`](crate::InjectedFault)) before it does anything,
//! which reaches the program with spindle-os's `PathError` naming the
//! operation and the path, as a real error would. Each is a fault of the
//! run ([`Fault::DiskError`]): numbered with the
//! others, listed in a failure's report and left out by shrinking when the
//! failure does not need it.
//!
//! # Invariants
//!
//! * The draws (injected errors, what a crash keeps) come from a
//!   generator of the disk's own seeded by the run's seed, in the order of
//!   the operations: a seed replays the disk exactly, and turning disk
//!   errors on does not change the scheduler's or the network's draws.
//! * A crash's losses are applied when the host crashes, before its
//!   fibers could run again; each one is noted in the run's record of the
//!   network ([`RunReport::network`](crate::RunReport::network)).
//! * The disk's lock is never held while the executor's state is locked:
//!   an injected error is decided between two of the disk's locks.
//!
//! The idea of a disk that loses unsynced writes on a crash comes from
//! FoundationDB's simulation and from ALICE-style crash-consistency
//! testing; the code is this crate's own.
//!
//! [`Run::host`]: crate::Run::host

use core::fmt;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use spindle_core::FiberId;
use spindle_net::driver::{VirtualDisk, VirtualFile, VirtualMetadata, VirtualOpenOptions};

use crate::Fault;
use crate::executor::Shared;
use crate::rng::{SimRng, threshold};

/// The settings of the simulated disks, given to
/// [`SimBuilder::disk`](crate::SimBuilder::disk); checked when the
/// simulator is built.
///
/// ```
/// use spindle_sim::{DiskConfig, Sim};
///
/// let sim = Sim::builder().disk(DiskConfig::default().errors(0.01)).build()?;
/// # let _ = sim;
/// # Ok::<(), spindle_sim::SimConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DiskConfig {
    errors: f64,
}

impl DiskConfig {
    /// The probability that a disk operation fails with an injected
    /// I/O error (default 0: never). See the [module documentation](self).
    pub fn errors(mut self, p: f64) -> Self {
        self.errors = p;
        self
    }

    /// The settings as the run uses them; a probability outside
    /// `0.0..=1.0` is named.
    pub(crate) fn params(&self) -> Result<DiskParams, (&'static str, f64)> {
        if !(0.0..=1.0).contains(&self.errors) {
            return Err(("disk errors", self.errors));
        }
        Ok(DiskParams {
            errors: threshold(self.errors),
        })
    }
}

/// [`DiskConfig`], checked.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DiskParams {
    errors: u64,
}

/// A path on a disk: its names from the root.
type Key = Vec<OsString>;

/// What a name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Dir,
    File(usize),
}

/// A file's bytes: what the program sees, and what a crash keeps.
#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    /// Names it has (0: only open handles keep it).
    links: usize,
}

/// The disk of one host.
#[derive(Debug, Default)]
struct HostDisk {
    name: String,
    nodes: BTreeMap<Key, Node>,
    inodes: Vec<Inode>,
    /// How many times the host crashed: handles of an earlier incarnation
    /// fail.
    epoch: u64,
}

/// Every disk of a run.
struct State {
    rng: SimRng,
    errors: u64,
    disks: Vec<HostDisk>,
}

/// The disks of one run, shared by the hosts' drivers and open files.
pub(crate) struct Disks {
    state: Mutex<State>,
    /// The executor, whose record numbers the injected errors.
    executor: Mutex<Weak<Shared>>,
}

fn err(kind: io::ErrorKind, what: &str) -> io::Error {
    io::Error::new(kind, format!("spindle-sim disk: {what}"))
}

fn not_found() -> io::Error {
    err(io::ErrorKind::NotFound, "no such file or directory")
}

/// The names of `path` from the root (`.` skipped, `..` goes up).
fn key(path: &Path) -> Key {
    let mut key = Key::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => key.push(name.to_os_string()),
            Component::ParentDir => {
                key.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    key
}

impl HostDisk {
    fn node(&self, key: &Key) -> Option<Node> {
        if key.is_empty() {
            return Some(Node::Dir);
        }
        self.nodes.get(key).copied()
    }

    /// Checks that `key`'s parent is a directory (to create `key` in it).
    fn parent_dir(&self, key: &Key) -> io::Result<()> {
        if key.is_empty() {
            return Err(err(io::ErrorKind::AlreadyExists, "the root exists"));
        }
        // Every ancestor must be a directory.
        for end in 0..key.len() {
            match self.node(&key[..end].to_vec()) {
                Some(Node::Dir) => {}
                Some(Node::File(_)) => {
                    return Err(err(io::ErrorKind::NotADirectory, "not a directory"));
                }
                None => return Err(not_found()),
            }
        }
        Ok(())
    }

    /// Looks `key` up, its ancestors checked.
    fn find(&self, key: &Key) -> io::Result<Node> {
        if key.is_empty() {
            return Ok(Node::Dir);
        }
        self.parent_dir(key)?;
        self.node(key).ok_or_else(not_found)
    }

    fn children(&self, key: &Key) -> impl Iterator<Item = (&Key, &Node)> {
        let depth = key.len() + 1;
        self.nodes
            .range(key.clone()..)
            .take_while(move |(k, _)| k.starts_with(key))
            .filter(move |(k, _)| k.len() == depth)
    }

    fn unlink(&mut self, inode: usize) {
        let file = &mut self.inodes[inode];
        file.links = file.links.saturating_sub(1);
    }

    fn metadata(&self, node: Node) -> VirtualMetadata {
        match node {
            Node::Dir => VirtualMetadata {
                is_dir: true,
                len: 0,
            },
            Node::File(inode) => VirtualMetadata {
                is_dir: false,
                len: self.inodes[inode].data.len() as u64,
            },
        }
    }

    /// The crash: what each file keeps (see the module documentation).
    /// Returns how many files lost bytes, and how many bytes.
    fn crash(&mut self, rng: &mut SimRng) -> (usize, usize) {
        self.epoch += 1;
        let (mut files, mut bytes) = (0, 0);
        for inode in &mut self.inodes {
            if inode.links == 0 {
                inode.data = Vec::new();
                inode.durable = Vec::new();
                continue;
            }
            if inode.data == inode.durable {
                continue;
            }
            let same = inode
                .data
                .iter()
                .zip(&inode.durable)
                .take_while(|(a, b)| a == b)
                .count();
            let end = inode.data.len();
            let kept = same + rng.below((end - same) as u64 + 1) as usize;
            let mut survivor = inode.data[..kept].to_vec();
            if kept < inode.durable.len() {
                survivor.extend_from_slice(&inode.durable[kept..]);
            }
            if survivor != inode.data {
                files += 1;
                bytes += end - kept;
            }
            inode.durable = survivor.clone();
            inode.data = survivor;
        }
        (files, bytes)
    }
}

impl Disks {
    pub(crate) fn new(params: DiskParams, seed: u64, hosts: Vec<String>) -> Arc<Disks> {
        Arc::new(Disks {
            state: Mutex::new(State {
                // Its own stream: the disk's draws change no other's.
                rng: SimRng::new(seed ^ 0x6469_736b_6469_736b),
                errors: params.errors,
                disks: hosts
                    .into_iter()
                    .map(|name| HostDisk {
                        name,
                        ..HostDisk::default()
                    })
                    .collect(),
            }),
            executor: Mutex::new(Weak::new()),
        })
    }

    pub(crate) fn set_executor(&self, executor: Weak<Shared>) {
        *self.executor.lock().unwrap_or_else(|e| e.into_inner()) = executor;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Host `host` crashed: its disk keeps what it keeps. A note for the
    /// run's record, if it lost anything.
    pub(crate) fn crash(&self, host: usize) -> Option<String> {
        let mut state = self.lock();
        let state = &mut *state;
        let disk = state.disks.get_mut(host)?;
        let (files, bytes) = disk.crash(&mut state.rng);
        (files > 0).then(|| {
            format!(
                "{}'s disk lost unsynced writes to {files} file(s) ({bytes} byte(s) of new contents)",
                disk.name
            )
        })
    }

    /// Maybe an injected error for `operation` on `path` of `host`.
    fn fault(&self, host: usize, operation: &'static str, path: &Path) -> io::Result<()> {
        let (drawn, name) = {
            let mut state = self.lock();
            if state.errors == 0 {
                return Ok(());
            }
            let threshold = state.errors;
            let drawn = state.rng.chance(threshold);
            (drawn, state.disks[host].name.clone())
        };
        if !drawn {
            return Ok(());
        }
        let executor = self
            .executor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade();
        let Some(shared) = executor else {
            return Ok(());
        };
        let mut state = shared.state();
        let (number, inject) = state.faults.decide();
        if !inject {
            return Ok(());
        }
        let fiber = FiberId::nth(u64::from(state.running));
        state.faults.injected.push(Fault::DiskError {
            number,
            host: name,
            operation,
            path: path.to_path_buf(),
            fiber,
        });
        Err(io::Error::from(crate::InjectedFault))
    }

    /// Runs `f` on `host`'s disk, after maybe an injected error.
    fn on<R>(
        &self,
        host: usize,
        operation: &'static str,
        path: &Path,
        f: impl FnOnce(&mut HostDisk) -> io::Result<R>,
    ) -> io::Result<R> {
        self.fault(host, operation, path)?;
        f(&mut self.lock().disks[host])
    }
}

/// One host's view of the disks: its own (its driver's
/// [`disk`](spindle_net::driver::IoDriver::disk)).
pub(crate) struct SimDisk {
    pub(crate) disks: Arc<Disks>,
    pub(crate) host: usize,
}

impl fmt::Debug for SimDisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimDisk").field("host", &self.host).finish()
    }
}

impl VirtualDisk for SimDisk {
    fn open(&self, path: &Path, o: VirtualOpenOptions) -> io::Result<Arc<dyn VirtualFile>> {
        let k = key(path);
        let (inode, epoch) = self.disks.on(self.host, "open", path, |disk| {
            let writes = o.write || o.append;
            let inode = match disk.find(&k) {
                Ok(Node::Dir) => {
                    return Err(err(io::ErrorKind::IsADirectory, "is a directory"));
                }
                Ok(Node::File(_)) if o.create_new => {
                    return Err(err(io::ErrorKind::AlreadyExists, "the file exists"));
                }
                Ok(Node::File(inode)) => {
                    if o.truncate && writes {
                        disk.inodes[inode].data.clear();
                    }
                    inode
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && (o.create || o.create_new) => {
                    disk.parent_dir(&k)?;
                    disk.inodes.push(Inode {
                        links: 1,
                        ..Inode::default()
                    });
                    let inode = disk.inodes.len() - 1;
                    disk.nodes.insert(k.clone(), Node::File(inode));
                    inode
                }
                Err(e) => return Err(e),
            };
            Ok((inode, disk.epoch))
        })?;
        Ok(Arc::new(SimFile {
            disks: self.disks.clone(),
            host: self.host,
            inode,
            epoch,
            path: path.to_path_buf(),
            options: o,
            cursor: Mutex::new(0),
        }))
    }

    fn metadata(&self, path: &Path) -> io::Result<VirtualMetadata> {
        let k = key(path);
        self.disks.on(self.host, "metadata", path, |disk| {
            let node = disk.find(&k)?;
            Ok(disk.metadata(node))
        })
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let k = key(path);
        self.disks.on(self.host, "create_dir", path, |disk| {
            disk.parent_dir(&k)?;
            if disk.node(&k).is_some() {
                return Err(err(io::ErrorKind::AlreadyExists, "the path exists"));
            }
            disk.nodes.insert(k, Node::Dir);
            Ok(())
        })
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let k = key(path);
        self.disks.on(self.host, "create_dir_all", path, |disk| {
            for end in 1..=k.len() {
                let prefix = k[..end].to_vec();
                match disk.node(&prefix) {
                    Some(Node::Dir) => {}
                    Some(Node::File(_)) if end == k.len() => {
                        return Err(err(io::ErrorKind::AlreadyExists, "a file is there"));
                    }
                    Some(Node::File(_)) => {
                        return Err(err(io::ErrorKind::NotADirectory, "not a directory"));
                    }
                    None => {
                        disk.nodes.insert(prefix, Node::Dir);
                    }
                }
            }
            Ok(())
        })
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let k = key(path);
        self.disks.on(self.host, "remove_file", path, |disk| {
            match disk.find(&k)? {
                Node::Dir => Err(err(io::ErrorKind::IsADirectory, "is a directory")),
                Node::File(inode) => {
                    disk.nodes.remove(&k);
                    disk.unlink(inode);
                    Ok(())
                }
            }
        })
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let k = key(path);
        self.disks.on(self.host, "remove_dir", path, |disk| {
            match disk.find(&k)? {
                Node::File(_) => Err(err(io::ErrorKind::NotADirectory, "not a directory")),
                Node::Dir if k.is_empty() => Err(err(
                    io::ErrorKind::ResourceBusy,
                    "the root cannot be removed",
                )),
                Node::Dir if disk.children(&k).next().is_some() => Err(err(
                    io::ErrorKind::DirectoryNotEmpty,
                    "the directory is not empty",
                )),
                Node::Dir => {
                    disk.nodes.remove(&k);
                    Ok(())
                }
            }
        })
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let k = key(path);
        self.disks.on(self.host, "remove_dir_all", path, |disk| {
            match disk.find(&k)? {
                Node::File(_) => Err(err(io::ErrorKind::NotADirectory, "not a directory")),
                Node::Dir if k.is_empty() => Err(err(
                    io::ErrorKind::ResourceBusy,
                    "the root cannot be removed",
                )),
                Node::Dir => {
                    let below: Vec<Key> = disk
                        .nodes
                        .range(k.clone()..)
                        .take_while(|(key, _)| key.starts_with(&k))
                        .map(|(key, _)| key.clone())
                        .collect();
                    for key in below {
                        if let Some(Node::File(inode)) = disk.nodes.remove(&key) {
                            disk.unlink(inode);
                        }
                    }
                    Ok(())
                }
            }
        })
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (f, t) = (key(from), key(to));
        self.disks.on(self.host, "rename", from, |disk| {
            let source = disk.find(&f)?;
            if f == t {
                return Ok(());
            }
            if f.is_empty() || t.is_empty() {
                return Err(err(
                    io::ErrorKind::ResourceBusy,
                    "the root cannot be renamed",
                ));
            }
            disk.parent_dir(&t)?;
            let target = disk.node(&t);
            match (source, target) {
                (Node::File(_), Some(Node::Dir)) => {
                    return Err(err(
                        io::ErrorKind::IsADirectory,
                        "the target is a directory",
                    ));
                }
                (Node::Dir, Some(Node::File(_))) => {
                    return Err(err(io::ErrorKind::NotADirectory, "the target is a file"));
                }
                (Node::Dir, Some(Node::Dir)) if disk.children(&t).next().is_some() => {
                    return Err(err(
                        io::ErrorKind::DirectoryNotEmpty,
                        "the target directory is not empty",
                    ));
                }
                (Node::Dir, _) if t.starts_with(&f) => {
                    return Err(err(
                        io::ErrorKind::InvalidInput,
                        "a directory cannot move below itself",
                    ));
                }
                (_, Some(Node::File(inode))) => disk.unlink(inode),
                _ => {}
            }
            disk.nodes.remove(&t);
            let moved: Vec<Key> = disk
                .nodes
                .range(f.clone()..)
                .take_while(|(key, _)| key.starts_with(&f))
                .map(|(key, _)| key.clone())
                .collect();
            for old in moved {
                if let Some(node) = disk.nodes.remove(&old) {
                    let mut new = t.clone();
                    new.extend_from_slice(&old[f.len()..]);
                    disk.nodes.insert(new, node);
                }
            }
            Ok(())
        })
    }

    fn hard_link(&self, original: &Path, link: &Path) -> io::Result<()> {
        let (o, l) = (key(original), key(link));
        self.disks.on(self.host, "hard_link", original, |disk| {
            match disk.find(&o)? {
                Node::Dir => Err(err(
                    io::ErrorKind::PermissionDenied,
                    "a directory cannot be linked",
                )),
                Node::File(inode) => {
                    disk.parent_dir(&l)?;
                    if disk.node(&l).is_some() {
                        return Err(err(io::ErrorKind::AlreadyExists, "the link exists"));
                    }
                    disk.nodes.insert(l, Node::File(inode));
                    disk.inodes[inode].links += 1;
                    Ok(())
                }
            }
        })
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(OsString, VirtualMetadata)>> {
        let k = key(path);
        self.disks
            .on(self.host, "read_dir", path, |disk| match disk.find(&k)? {
                Node::File(_) => Err(err(io::ErrorKind::NotADirectory, "not a directory")),
                Node::Dir => Ok(disk
                    .children(&k)
                    .map(|(key, node)| (key[key.len() - 1].clone(), disk.metadata(*node)))
                    .collect()),
            })
    }
}

/// A file open on a host's disk.
struct SimFile {
    disks: Arc<Disks>,
    host: usize,
    inode: usize,
    /// The host's incarnation that opened it.
    epoch: u64,
    path: PathBuf,
    options: VirtualOpenOptions,
    cursor: Mutex<u64>,
}

/// The error of a call the file was not opened for (the system's).
fn bad_descriptor() -> io::Error {
    io::Error::from_raw_os_error(9)
}

impl SimFile {
    /// Runs `f` on the file's bytes and cursor, after maybe an injected
    /// error.
    fn on<R>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&mut Inode, &mut u64) -> io::Result<R>,
    ) -> io::Result<R> {
        self.disks.fault(self.host, operation, &self.path)?;
        let mut state = self.disks.lock();
        let disk = &mut state.disks[self.host];
        if disk.epoch != self.epoch {
            return Err(err(
                io::ErrorKind::Other,
                "the file was opened before its host crashed",
            ));
        }
        let mut cursor = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut disk.inodes[self.inode], &mut cursor)
    }

    fn readable(&self) -> io::Result<()> {
        if self.options.read {
            Ok(())
        } else {
            Err(bad_descriptor())
        }
    }

    fn writable(&self) -> io::Result<()> {
        if self.options.write || self.options.append {
            Ok(())
        } else {
            Err(bad_descriptor())
        }
    }
}

fn read_from(data: &[u8], offset: u64, max: usize) -> Vec<u8> {
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(data.len());
    let end = start.saturating_add(max).min(data.len());
    data[start..end].to_vec()
}

fn write_into(data: &mut Vec<u8>, offset: u64, bytes: &[u8]) -> io::Result<()> {
    let start = usize::try_from(offset)
        .map_err(|_| err(io::ErrorKind::FileTooLarge, "offset beyond memory"))?;
    let end = start
        .checked_add(bytes.len())
        .ok_or_else(|| err(io::ErrorKind::FileTooLarge, "offset beyond memory"))?;
    if data.len() < end {
        data.resize(end, 0);
    }
    data[start..end].copy_from_slice(bytes);
    Ok(())
}

impl VirtualFile for SimFile {
    fn read(&self, max: usize) -> io::Result<Vec<u8>> {
        self.readable()?;
        self.on("read", |inode, cursor| {
            let bytes = read_from(&inode.data, *cursor, max);
            *cursor += bytes.len() as u64;
            Ok(bytes)
        })
    }

    fn read_at(&self, offset: u64, max: usize) -> io::Result<Vec<u8>> {
        self.readable()?;
        self.on("read_at", |inode, _| {
            Ok(read_from(&inode.data, offset, max))
        })
    }

    fn write(&self, data: &[u8]) -> io::Result<usize> {
        self.writable()?;
        let append = self.options.append;
        self.on("write", |inode, cursor| {
            if append {
                *cursor = inode.data.len() as u64;
            }
            write_into(&mut inode.data, *cursor, data)?;
            *cursor += data.len() as u64;
            Ok(data.len())
        })
    }

    fn write_all_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.writable()?;
        self.on("write_at", |inode, _| {
            write_into(&mut inode.data, offset, data)
        })
    }

    fn seek(&self, position: SeekFrom) -> io::Result<u64> {
        self.on("seek", |inode, cursor| {
            let target = match position {
                SeekFrom::Start(at) => Some(at),
                SeekFrom::End(by) => (inode.data.len() as u64).checked_add_signed(by),
                SeekFrom::Current(by) => cursor.checked_add_signed(by),
            };
            let target = target.ok_or_else(|| {
                err(
                    io::ErrorKind::InvalidInput,
                    "seek to a negative or overflowing position",
                )
            })?;
            *cursor = target;
            Ok(target)
        })
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        if !self.options.write && !self.options.append {
            return Err(err(
                io::ErrorKind::InvalidInput,
                "the file is not open for writing",
            ));
        }
        self.on("set_len", |inode, _| {
            let len = usize::try_from(len)
                .map_err(|_| err(io::ErrorKind::FileTooLarge, "length beyond memory"))?;
            inode.data.resize(len, 0);
            Ok(())
        })
    }

    fn sync(&self) -> io::Result<()> {
        self.on("sync", |inode, _| {
            inode.durable = inode.data.clone();
            Ok(())
        })
    }

    fn metadata(&self) -> io::Result<VirtualMetadata> {
        self.on("metadata", |inode, _| {
            Ok(VirtualMetadata {
                is_dir: false,
                len: inode.data.len() as u64,
            })
        })
    }
}
