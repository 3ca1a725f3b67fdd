//! The process's one answer to SIGINT, SIGTERM and SIGHUP, whichever command runs.
//!
//! A command either stops gracefully ([`stop_gracefully`]: the signal only sets a flag its
//! loop polls, and the command's own code answers what it took and removes what it made) or
//! dies of the signal as it would have, after removing the files it made and still owns
//! ([`RemovedOnSignal`]: a control socket, a scratch file, a file being calibrated). Both go
//! through one handler, so a part installed later (the control socket under `serve`) can
//! never replace a command's graceful stop with a death.
//!
//! The handler calls only async-signal-safe functions (lstat, unlink, signal, raise) and
//! reads only atomics (waiting on one while another thread registers a file it is making). A file is removed only if it is still the very file registered (its
//! device and inode), never one put at its path since.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Files one process may have registered at once: a command has a control socket and a
/// file or two of its own; a test process runs many servers at once.
const SLOTS: usize = 64;

/// A registered file: its path (a leaked C string, null when free) and its identity.
struct Slot {
    path: AtomicPtr<libc::c_char>,
    dev: AtomicU64,
    ino: AtomicU64,
}

#[expect(
    clippy::declare_interior_mutable_const,
    reason = "the initialiser of a static array, copied once per slot"
)]
const FREE: Slot = Slot {
    path: AtomicPtr::new(std::ptr::null_mut()),
    dev: AtomicU64::new(0),
    ino: AtomicU64::new(0),
};

static REGISTERED: [Slot; SLOTS] = [FREE; SLOTS];

/// The signals the handler answers.
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Set once the command stops gracefully: a signal then sets [`STOP`] and nothing else.
static GRACEFUL: AtomicBool = AtomicBool::new(false);

/// Set by a signal under a graceful command.
static STOP: AtomicBool = AtomicBool::new(false);

/// Files being made by [`create_removed_on_signal`] and not yet registered: a handler on
/// another thread waits for them before it looks for files to remove.
static CREATING: AtomicUsize = AtomicUsize::new(0);

static INSTALLED: Once = Once::new();

/// The command stops gracefully on SIGINT, SIGTERM and SIGHUP: the returned flag is set and
/// the command's loop sees it. Files registered with [`RemovedOnSignal`] are then the
/// command's to remove as it stops (their guards do).
///
/// # Errors
/// A handler could not be installed.
pub fn stop_gracefully() -> io::Result<&'static AtomicBool> {
    GRACEFUL.store(true, Ordering::Release);
    install()?;
    Ok(&STOP)
}

/// A file the command made and removes if a signal ends it first: the guard forgets it when
/// dropped (keep it while the file is only half made; drop it once the file is the user's,
/// or remove the file and then drop it).
#[derive(Debug)]
pub struct RemovedOnSignal {
    slot: usize,
}

impl RemovedOnSignal {
    /// Registers the file now at `path` (as it is now: its device and inode).
    ///
    /// # Errors
    /// `path` cannot be examined, holds a NUL byte, or every slot is taken.
    pub fn new(path: &Path) -> io::Result<Self> {
        let meta = std::fs::symlink_metadata(path)?;
        Self::with_identity(path, meta.dev(), meta.ino())
    }

    /// Registers the file that will be at `path` with device `dev` and inode `ino` (a
    /// socket bound elsewhere and renamed into place).
    ///
    /// # Errors
    /// `path` holds a NUL byte, every slot is taken, or the handler could not be installed.
    pub fn with_identity(path: &Path, dev: u64, ino: u64) -> io::Result<Self> {
        install()?;
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
        // A marker claims a free slot before its identity is written; the handler skips
        // any slot whose path is not a real string yet.
        let claim = claim_marker();
        let slot = REGISTERED
            .iter()
            .position(|s| {
                s.path
                    .compare_exchange(
                        std::ptr::null_mut(),
                        claim,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok()
            })
            .ok_or_else(|| {
                io::Error::other(format!(
                    "{}: more than {SLOTS} files to remove on a signal",
                    path.display()
                ))
            })?;
        let s = &REGISTERED[slot];
        s.dev.store(dev, Ordering::Release);
        s.ino.store(ino, Ordering::Release);
        // Leaked on purpose: a handler on another thread may be reading it at any moment,
        // so it is never freed (a few bytes per registration, a handful per run).
        s.path.store(c_path.into_raw(), Ordering::Release);
        Ok(Self { slot })
    }
}

/// Creates a new file at `path` with `create` (which must refuse one that is there) and
/// registers it for removal on a signal before any signal can end the command: the signals
/// are blocked in this thread from before the file exists until it is registered, so one
/// that comes to it in between is answered once it is, and a handler running on another
/// thread meanwhile waits for the registration ([`CREATING`]) before it looks; either way
/// the file is removed, not left behind (a signal a test sent as soon as the file appeared
/// found it so, the process having other threads by then).
///
/// # Errors
/// `create`'s (`AlreadyExists` for a file that is there, left alone), or the registration's
/// (the file just made is removed again).
pub fn create_removed_on_signal(
    path: &Path,
    create: impl FnOnce(&Path) -> io::Result<std::fs::File>,
) -> io::Result<(std::fs::File, RemovedOnSignal)> {
    install()?;
    let _blocked = Blocked::new()?;
    CREATING.fetch_add(1, Ordering::AcqRel);
    let registered = create(path).and_then(|file| {
        let meta = file.metadata();
        let guard = meta.and_then(|m| RemovedOnSignal::with_identity(path, m.dev(), m.ino()));
        guard.map(|g| (file, g)).inspect_err(|_| {
            let _ = std::fs::remove_file(path);
        })
    });
    CREATING.fetch_sub(1, Ordering::AcqRel);
    registered
}

/// The handler's signals blocked in this thread until dropped (the mask before restored).
struct Blocked(libc::sigset_t);

impl Blocked {
    fn new() -> io::Result<Self> {
        // SAFETY: both sets are this frame's own, zeroed and then filled by sigemptyset and
        // sigaddset before pthread_sigmask reads one and writes the other.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for signal in SIGNALS {
                libc::sigaddset(&mut set, signal);
            }
            let mut old: libc::sigset_t = std::mem::zeroed();
            match libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) {
                0 => Ok(Self(old)),
                errno => Err(io::Error::from_raw_os_error(errno)),
            }
        }
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask pthread_sigmask wrote into `self.0`; a signal that came
        // while it was blocked is delivered now.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}

impl Drop for RemovedOnSignal {
    fn drop(&mut self) {
        REGISTERED[self.slot]
            .path
            .store(std::ptr::null_mut(), Ordering::Release);
    }
}

/// The marker of a slot being filled: a unique address that is never a path.
fn claim_marker() -> *mut libc::c_char {
    static MARKER: u8 = 0;
    (&raw const MARKER).cast::<libc::c_char>().cast_mut()
}

/// Installs the one handler for SIGINT, SIGTERM and SIGHUP, once per process.
fn install() -> io::Result<()> {
    let mut result = Ok(());
    INSTALLED.call_once(|| {
        for signal in SIGNALS {
            // SAFETY: the handler is async-signal-safe (see `on_signal`); the sigaction
            // struct is zeroed and filled before the call, which copies it.
            let failed = unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(signal, &action, std::ptr::null_mut()) != 0
            };
            if failed {
                result = Err(io::Error::other(format!(
                    "installing the signal handler: {}",
                    io::Error::last_os_error()
                )));
                return;
            }
        }
    });
    result
}

extern "C" fn on_signal(signal: libc::c_int) {
    if GRACEFUL.load(Ordering::Acquire) {
        STOP.store(true, Ordering::Release);
        return;
    }
    // A file another thread is making is registered within a few system calls; that
    // thread has these signals blocked, so this is never it.
    while CREATING.load(Ordering::Acquire) > 0 {
        std::hint::spin_loop();
    }
    for slot in &REGISTERED {
        let path = slot.path.load(Ordering::Acquire);
        if path.is_null() || path == claim_marker() {
            continue;
        }
        let (dev, ino) = (
            slot.dev.load(Ordering::Acquire),
            slot.ino.load(Ordering::Acquire),
        );
        // SAFETY: `path` is a CString leaked by `with_identity`, never freed; lstat and
        // unlink are async-signal-safe, and the stat buffer is this frame's own.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::lstat(path, &mut st) == 0 && st.st_dev == dev && st.st_ino == ino {
                libc::unlink(path);
            }
        }
    }
    // SAFETY: signal and raise are async-signal-safe: the process dies of the signal, as it
    // would have without this handler.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `signal` is blocked in this thread now.
    fn blocked(signal: libc::c_int) -> bool {
        // SAFETY: a query (no set given) of this thread's mask into a set of this frame.
        unsafe {
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, signal) == 1
        }
    }

    #[test]
    fn a_new_file_is_made_with_the_signals_blocked_registered_and_the_mask_restored() {
        let dir = std::env::temp_dir().join(format!("signal-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("made.dat");
        let _ = std::fs::remove_file(&path);
        let mut during = Vec::new();
        let (_file, guard) = create_removed_on_signal(&path, |p| {
            during = SIGNALS.iter().map(|&s| blocked(s)).collect();
            during.push(CREATING.load(Ordering::Acquire) == 1);
            std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(p)
        })
        .unwrap();
        assert_eq!(
            during,
            vec![true; 4],
            "blocked, and counted as being made, while made"
        );
        assert_eq!(
            CREATING.load(Ordering::Acquire),
            0,
            "counted out once registered"
        );
        assert!(SIGNALS.iter().all(|&s| !blocked(s)), "restored after");
        let slot = &REGISTERED[guard.slot];
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(
            (
                slot.dev.load(Ordering::Acquire),
                slot.ino.load(Ordering::Acquire)
            ),
            (meta.dev(), meta.ino()),
            "registered as the file made"
        );
        drop(guard);
        // A file that is there is left alone, and the mask restored all the same.
        let err = create_removed_on_signal(&path, |p| {
            std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(p)
        })
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert!(path.exists() && SIGNALS.iter().all(|&s| !blocked(s)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
