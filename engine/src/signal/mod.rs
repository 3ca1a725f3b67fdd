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
//! reads only atomics. A file is removed only if it is still the very file registered (its
//! device and inode), never one put at its path since.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

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

/// Set once the command stops gracefully: a signal then sets [`STOP`] and nothing else.
static GRACEFUL: AtomicBool = AtomicBool::new(false);

/// Set by a signal under a graceful command.
static STOP: AtomicBool = AtomicBool::new(false);

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
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
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
