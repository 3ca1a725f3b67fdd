//! Where clients connect: TCP (loopback unless another address is given) or a unix socket.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};

use std::path::PathBuf;

/// The port NBD servers listen on by default.
pub const DEFAULT_PORT: u16 = 10809;

/// An address to listen on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `HOST:PORT`, or a bare `PORT` on loopback.
    Tcp(String),
    /// `unix:PATH`.
    Unix(PathBuf),
}

impl Address {
    /// Parses `--nbd`'s value: `unix:PATH`, `HOST:PORT`, `:PORT` or `PORT` (both on
    /// 127.0.0.1).
    ///
    /// # Errors
    /// A message naming what is wrong with `text`.
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("--nbd unix:PATH needs a path".into());
            }
            return Ok(Self::Unix(PathBuf::from(path)));
        }
        let port_only = text.strip_prefix(':').unwrap_or(text);
        if port_only.parse::<u16>().is_ok() {
            return Ok(Self::Tcp(format!("127.0.0.1:{port_only}")));
        }
        match text.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(Self::Tcp(text.to_owned()))
            }
            _ => Err(format!(
                "--nbd {text}: expected HOST:PORT, PORT, or unix:PATH (e.g. 127.0.0.1:{DEFAULT_PORT})"
            )),
        }
    }
}

/// Fills `buf` from `stream`; false if the stream ended cleanly before its first byte (a
/// client that leaves between messages), an error if it ended inside `buf`.
///
/// # Errors
/// The stream's error, or `UnexpectedEof` inside `buf`.
pub fn read_full<R: Read>(stream: &mut R, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// A bound listener.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Binds `address`; a unix socket path must not exist yet, and the socket is created
    /// with mode 0600 (only its owner's clients connect), whatever the umask.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub fn bind(address: &Address) -> io::Result<Self> {
        let listener = match address {
            Address::Tcp(addr) => Self::Tcp(TcpListener::bind(addr)?),
            Address::Unix(path) => Self::Unix(crate::peer::bind_private(path)?, path.clone()),
        };
        // The engine accepts when the ring says a client waits, and never blocks on it.
        match &listener {
            Self::Tcp(l) => l.set_nonblocking(true)?,
            Self::Unix(l, _) => l.set_nonblocking(true)?,
        }
        Ok(listener)
    }

    /// A client, if one is waiting.
    ///
    /// # Errors
    /// Accepting failed for a reason other than no client waiting.
    pub fn accept(&self) -> io::Result<Option<(Stream, String)>> {
        let accepted = match self {
            Self::Tcp(l) => l.accept().map(|(s, peer)| {
                let _ = s.set_nodelay(true);
                (Stream::Tcp(s), peer.to_string())
            }),
            Self::Unix(l, path) => l
                .accept()
                .map(|(s, _)| (Stream::Unix(s), path.display().to_string())),
        };
        match accepted {
            // The engine's thread serves every connection, so none may block it.
            Ok((stream, peer)) => {
                stream.set_nonblocking()?;
                Ok(Some((stream, peer)))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The descriptor to poll.
    pub fn raw_fd(&self) -> RawFd {
        match self {
            Self::Tcp(l) => l.as_raw_fd(),
            Self::Unix(l, _) => l.as_raw_fd(),
        }
    }
}

impl fmt::Display for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(l) => match l.local_addr() {
                Ok(addr) => write!(f, "{addr}"),
                Err(_) => write!(f, "tcp"),
            },
            Self::Unix(_, path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Self::Unix(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A client connection.
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Ends the connection both ways; a reader blocked on it sees the end.
    ///
    /// # Errors
    /// The socket was already gone.
    pub fn shutdown(&self) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.shutdown(Shutdown::Both),
            Self::Unix(s) => s.shutdown(Shutdown::Both),
        }
    }

    /// Stops reading only: the reader sees the end while replies still go out.
    ///
    /// # Errors
    /// The socket was already gone.
    pub fn shutdown_read(&self) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.shutdown(Shutdown::Read),
            Self::Unix(s) => s.shutdown(Shutdown::Read),
        }
    }

    /// Bounds how long a write may block.
    ///
    /// # Errors
    /// The socket refused the option.
    pub fn set_write_timeout(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_write_timeout(timeout),
            Self::Unix(s) => s.set_write_timeout(timeout),
        }
    }

    /// Sends as much of `parts` as the socket takes without blocking; 0 if it takes none.
    ///
    /// # Errors
    /// The connection failed.
    pub fn send_now(&self, parts: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let fd = match self {
            Self::Tcp(s) => s.as_raw_fd(),
            Self::Unix(s) => s.as_raw_fd(),
        };
        // SAFETY: a zeroed msghdr is valid (no name, no control data); its iovec array is
        // `parts`, which IoSlice lays out as struct iovec and which outlives the call.
        let sent = unsafe {
            let mut message: libc::msghdr = std::mem::zeroed();
            message.msg_iov = parts.as_ptr().cast_mut().cast::<libc::iovec>();
            message.msg_iovlen = parts.len().min(libc::UIO_MAXIOV as usize) as _;
            libc::sendmsg(fd, &message, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        };
        match sent {
            n if n >= 0 => Ok(n as usize),
            _ => {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                    _ => Err(e),
                }
            }
        }
    }

    /// Reads what has arrived into `buf` without blocking: `None` if nothing has, `Some(0)`
    /// at the end of the stream.
    ///
    /// # Errors
    /// The connection failed.
    pub fn recv_now(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let fd = match self {
            Self::Tcp(s) => s.as_raw_fd(),
            Self::Unix(s) => s.as_raw_fd(),
        };
        // SAFETY: `buf` is valid for writes of its length for the duration of the call.
        let got = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        if got >= 0 {
            return Ok(Some(got as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        }
    }

    /// Bytes that have arrived and are not yet read (FIONREAD); 0 if the socket cannot say.
    pub fn unread_bytes(&self) -> usize {
        let fd = match self {
            Self::Tcp(s) => s.as_raw_fd(),
            Self::Unix(s) => s.as_raw_fd(),
        };
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one c_int through the pointer, which is valid for it.
        let ok = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) } == 0;
        if ok {
            usize::try_from(n).unwrap_or(0)
        } else {
            0
        }
    }

    /// Makes reads and writes return at once instead of waiting (the engine's thread
    /// serves every connection, so it never blocks on one).
    ///
    /// # Errors
    /// The socket refused the flag.
    pub fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_nonblocking(true),
            Self::Unix(s) => s.set_nonblocking(true),
        }
    }

    /// The socket's descriptor, for the ring's polls.
    pub fn raw_fd(&self) -> RawFd {
        match self {
            Self::Tcp(s) => s.as_raw_fd(),
            Self::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl crate::peer::Timed for Stream {
    fn set_read_deadline(&self, timeout: std::time::Duration) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_read_timeout(Some(timeout)),
            Self::Unix(s) => s.set_read_timeout(Some(timeout)),
        }
    }

    fn set_write_deadline(&self, timeout: std::time::Duration) -> io::Result<()> {
        self.set_write_timeout(Some(timeout))
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.read(buf),
            Self::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write(buf),
            Self::Unix(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write_vectored(bufs),
            Self::Unix(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.flush(),
            Self::Unix(s) => s.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_loopback_and_bad_ones_are_named() {
        assert_eq!(
            Address::parse("10809"),
            Ok(Address::Tcp("127.0.0.1:10809".into()))
        );
        assert_eq!(Address::parse(":0"), Ok(Address::Tcp("127.0.0.1:0".into())));
        assert_eq!(
            Address::parse("0.0.0.0:10809"),
            Ok(Address::Tcp("0.0.0.0:10809".into()))
        );
        assert_eq!(
            Address::parse("unix:/tmp/s"),
            Ok(Address::Unix("/tmp/s".into()))
        );
        assert!(
            Address::parse("localhost")
                .unwrap_err()
                .contains("HOST:PORT")
        );
        assert!(Address::parse("unix:").is_err());
        assert!(Address::parse("host:99999").is_err());
    }
}
