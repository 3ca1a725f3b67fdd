//! What every server of schedhost's uses with its peers, none of which it trusts: unix
//! sockets that exist only with their final mode ([`bind_private`]), and reads and writes
//! bounded by one deadline over the whole exchange and by a byte limit ([`Deadline`],
//! [`read_line`], [`write_all`]). A peer that sends or takes one byte at a time cannot
//! stretch a per-call timeout into hours: the deadline is for the whole request or reply.

use std::io::{self, IoSlice, Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A point in time after which an exchange with a peer has failed.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(Instant);

impl Deadline {
    /// `within` from now.
    pub fn after(within: Duration) -> Self {
        Self(Instant::now() + within)
    }

    /// Time left, or a `TimedOut` error naming `what` once there is none.
    ///
    /// # Errors
    /// The deadline has passed.
    pub fn remaining(&self, what: &str) -> io::Result<Duration> {
        let left = self.0.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{what}: the deadline passed"),
            ));
        }
        Ok(left)
    }
}

/// A stream whose blocking calls can be bounded in time.
pub trait Timed: Read + Write {
    /// Bounds the next reads.
    ///
    /// # Errors
    /// The socket refused the option.
    fn set_read_deadline(&self, timeout: Duration) -> io::Result<()>;
    /// Bounds the next writes.
    ///
    /// # Errors
    /// The socket refused the option.
    fn set_write_deadline(&self, timeout: Duration) -> io::Result<()>;
}

impl Timed for UnixStream {
    fn set_read_deadline(&self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(timeout))
    }
    fn set_write_deadline(&self, timeout: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(timeout))
    }
}

impl Timed for std::net::TcpStream {
    fn set_read_deadline(&self, timeout: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(timeout))
    }
    fn set_write_deadline(&self, timeout: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(timeout))
    }
}

/// A stream whose every read and write must finish before one deadline: a protocol
/// exchange (a handshake, say) run over it cannot outlast the deadline however the peer
/// paces its bytes.
#[derive(Debug)]
pub struct Bounded<'a, S: Timed> {
    inner: &'a mut S,
    deadline: Deadline,
    what: &'static str,
}

impl<'a, S: Timed> Bounded<'a, S> {
    /// `inner` until `deadline`; `what` names the exchange in the timeout's error.
    pub fn new(inner: &'a mut S, deadline: Deadline, what: &'static str) -> Self {
        Self {
            inner,
            deadline,
            what,
        }
    }
}

impl<S: Timed> Read for Bounded<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner
            .set_read_deadline(self.deadline.remaining(self.what)?)?;
        self.inner.read(buf).map_err(|e| timed_out(e, self.what))
    }
}

impl<S: Timed> Write for Bounded<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner
            .set_write_deadline(self.deadline.remaining(self.what)?)?;
        self.inner.write(buf).map_err(|e| timed_out(e, self.what))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A socket timeout as a `TimedOut` error naming `what`; other errors as they are.
fn timed_out(e: io::Error, what: &str) -> io::Error {
    if is_timeout(&e) {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what}: the deadline passed"),
        )
    } else {
        e
    }
}

/// Reads one `\n`-terminated line of at most `limit` bytes before `deadline`; `None` if the
/// peer closed before sending anything. Bytes after the newline are kept in `pending` for
/// the next line.
///
/// # Errors
/// The deadline passed, the line is longer than `limit`, it is not UTF-8, or the stream
/// failed or ended inside the line.
pub fn read_line<S: Timed>(
    stream: &mut S,
    pending: &mut Vec<u8>,
    limit: usize,
    deadline: Deadline,
) -> io::Result<Option<String>> {
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let text = String::from_utf8(line).map_err(|_| invalid("the line is not UTF-8"))?;
            return Ok(Some(text));
        }
        if pending.len() > limit {
            return Err(invalid(&format!("a line longer than {limit} bytes")));
        }
        stream.set_read_deadline(deadline.remaining("reading a request")?)?;
        match stream.read(&mut chunk) {
            Ok(0) if pending.is_empty() => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(timed_out(e, "reading a request")),
        }
    }
}

/// Writes every byte of `parts` before `deadline`, however slowly the peer takes them.
///
/// # Errors
/// The deadline passed or the stream failed.
pub fn write_all<S: Timed>(
    stream: &mut S,
    parts: &mut [IoSlice<'_>],
    deadline: Deadline,
) -> io::Result<()> {
    let mut rest = parts;
    while !rest.is_empty() {
        stream.set_write_deadline(deadline.remaining("writing a reply")?)?;
        match stream.write_vectored(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(timed_out(e, "writing a reply")),
        }
    }
    Ok(())
}

/// True iff `e` is how a socket timeout shows (EAGAIN on Linux).
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// Binds a unix socket at `path` that exists only with mode 0600: it is bound inside a new
/// directory only its owner can enter, given its mode there, and renamed into place, so no
/// other user can connect in between whatever the umask, and nothing follows a symlink a
/// peer planted at `path` (the rename replaces only a name, and an existing one is refused
/// first).
///
/// # Errors
/// `path` exists, its directory cannot be written, or binding failed.
pub fn bind_private(path: &Path) -> io::Result<UnixListener> {
    bind_private_then(path, |_| Ok(()))
}

/// As [`bind_private`], calling `bound` with the staged socket's path after it is bound and
/// before it is renamed into place (to note its identity, say).
///
/// # Errors
/// As [`bind_private`], or `bound`'s.
pub fn bind_private_then(
    path: &Path,
    bound: impl FnOnce(&Path) -> io::Result<()>,
) -> io::Result<UnixListener> {
    if path.symlink_metadata().is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the path exists; remove the old socket or pick another path",
        ));
    }
    let dir = private_dir(path)?;
    let staged = dir.join("s");
    let listening = UnixListener::bind(&staged).and_then(|listener| {
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
        bound(&staged)?;
        rename_no_replace(&staged, path)?;
        Ok(listener)
    });
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&dir);
    listening
}

/// Renames `from` to `to` unless `to` exists: a name that appeared since the caller looked
/// (a file, a planted symlink) is neither replaced nor followed.
fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))
    };
    let (c_from, c_to) = (c(from)?, c(to)?);
    // SAFETY: both are valid NUL-terminated paths for the duration of the call.
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            c_from.as_ptr(),
            libc::AT_FDCWD,
            c_to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if done == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EINVAL) {
        return Err(e);
    }
    // A filesystem without RENAME_NOREPLACE: look, then rename (a narrow window).
    if to.symlink_metadata().is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the path appeared while binding; pick another path",
        ));
    }
    std::fs::rename(from, to)
}

/// A new mode-0700 directory beside `path`.
fn private_dir(path: &Path) -> io::Result<PathBuf> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "socket".into(), |n| n.to_string_lossy().into_owned());
    for attempt in 0..100u32 {
        let dir = parent.join(format!(".{name}.{}.{attempt}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free name for a private directory beside the socket",
    ))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_private_socket_has_mode_0600_whatever_the_umask() {
        let dir = std::env::temp_dir().join(format!("schedhost-peer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        // SAFETY: umask only changes this process's creation mask; the test restores it.
        let old = unsafe { libc::umask(0) };
        let listener = bind_private(&path);
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let _listener = listener.unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(bind_private(&path).is_err(), "an existing path is refused");
        let link = dir.join("link.sock");
        std::os::unix::fs::symlink(dir.join("elsewhere"), &link).unwrap();
        assert!(bind_private(&link).is_err(), "a planted symlink is refused");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_dripping_peer_is_cut_off_at_the_deadline_not_per_byte() {
        let (mut server, mut client) = UnixStream::pair().unwrap();
        let drip = std::thread::spawn(move || {
            for _ in 0..50 {
                if client.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let started = Instant::now();
        let err = read_line(
            &mut server,
            &mut Vec::new(),
            4096,
            Deadline::after(Duration::from_millis(200)),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_millis(900));
        drop(server);
        drip.join().unwrap();
    }

    #[test]
    fn a_line_past_the_limit_is_refused() {
        let (mut server, mut client) = UnixStream::pair().unwrap();
        client.write_all(&[b'a'; 5000]).unwrap();
        let err = read_line(
            &mut server,
            &mut Vec::new(),
            4096,
            Deadline::after(Duration::from_secs(5)),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        client.write_all(b"\n").unwrap();
    }
}
