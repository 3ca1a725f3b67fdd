//! `serve --metrics ADDR`: Prometheus metrics over HTTP. Each scrape gets its own thread
//! (at most [`MAX_CLIENTS`] at once) that answers `GET /metrics`; the ring thread, which
//! owns the counters, renders the text between two batches of I/O (as it answers control
//! requests), so the hot path never takes a lock for them.
//!
//! A client must send its whole request head, at most [`MAX_REQUEST`] bytes, within
//! [`REQUEST_TIMEOUT`], and take the answer within it too: one that drips bytes or never
//! reads holds only its own thread, and only that long.

mod admission;
pub mod exposition;

pub use admission::{Admission, Admitted};

use std::io::{self, IoSlice, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::peer::{self, Deadline, Timed};

/// Longest wait for the ring thread to render a scrape.
const RENDER_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapes answered at once. When all are taken, the oldest client that has not sent its
/// request yet is closed to make room ([`Admission`]); only when every one has, a newcomer
/// gets a 503 at once.
pub const MAX_CLIENTS: usize = 16;
/// Longest request head (request line and headers).
pub const MAX_REQUEST: usize = 16 * 1024;
/// How long a client may take to send its request, and to take the answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The ring thread's end: scrapes waiting for their text.
#[derive(Debug)]
pub struct Endpoint {
    scrapes: Receiver<Sender<String>>,
    address: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Endpoint {
    /// Listens on `address` (loopback unless another host is given); `wake` interrupts the
    /// ring thread's wait when a scrape arrives.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub fn start(address: &str, wake: Arc<dyn Fn() + Send + Sync>) -> io::Result<Self> {
        let address = if address.parse::<u16>().is_ok() {
            format!("127.0.0.1:{address}")
        } else if let Some(port) = address.strip_prefix(':') {
            format!("127.0.0.1:{port}")
        } else {
            address.to_owned()
        };
        let listener = TcpListener::bind(&address)?;
        let bound = listener.local_addr()?;
        let (sender, scrapes) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("schedhost-metrics".into())
            .spawn(move || serve(&listener, &sender, wake, &stopped))?;
        Ok(Self {
            scrapes,
            address: bound,
            stop,
        })
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Scrapes waiting for their text, without blocking.
    pub fn take(&self) -> Vec<Sender<String>> {
        self.scrapes.try_iter().collect()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Wake the accepting thread so it sees the flag and lets the port go.
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(self.address);
    }
}

/// Answers HTTP clients, each on its own thread, until the endpoint is dropped.
fn serve(
    listener: &TcpListener,
    scrapes: &Sender<Sender<String>>,
    wake: Arc<dyn Fn() + Send + Sync>,
    stop: &AtomicBool,
) {
    // Each update is one whole call on the list, so a poisoned lock still holds a whole one.
    let places: Arc<Mutex<Admission<TcpStream>>> =
        Arc::new(Mutex::new(Admission::new(MAX_CLIENTS)));
    for stream in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut stream) = stream else {
            // Out of descriptors, say: accept fails at once, so wait before the next try.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        let admitted = places
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .admit(handle);
        let id = match admitted {
            Ok(Admitted { id, displaced }) => {
                if let Some(silent) = displaced {
                    // Its thread's read returns at once and the thread ends.
                    let _ = silent.shutdown(std::net::Shutdown::Both);
                }
                id
            }
            Err(_) => {
                let _ = respond(
                    &mut stream,
                    "503 Service Unavailable",
                    "too many scrapes at once\n",
                );
                continue;
            }
        };
        let (scrapes, wake, held) = (scrapes.clone(), Arc::clone(&wake), Arc::clone(&places));
        let spawned = std::thread::Builder::new()
            .name("schedhost-scrape".into())
            .spawn(move || {
                let spoke = || {
                    held.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .spoke(id)
                };
                if let Err(e) = answer(stream, &scrapes, wake.as_ref(), spoke) {
                    tracing::debug!("a metrics client went away: {e}");
                }
                held.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .leave(id);
            });
        if let Err(e) = spawned {
            places
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .leave(id);
            tracing::warn!("metrics: no thread for a client: {e}");
        }
    }
}

/// What a request head asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// `GET /metrics` (any query string).
    Metrics,
    /// A GET of another path.
    NotFound,
    /// Another method.
    NotAllowed,
}

/// Parses an HTTP request head (everything up to the blank line). Sans-IO: the fuzz target
/// drives it with arbitrary bytes.
///
/// # Errors
/// The head is not text or has no request line.
pub fn parse_head(head: &[u8]) -> Result<Ask, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "the request is not UTF-8")?;
    let request_line = text.lines().next().ok_or("an empty request")?;
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method.is_empty() {
        return Err("no request line");
    }
    Ok(match (method, target.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => Ask::Metrics,
        ("GET", _) => Ask::NotFound,
        _ => Ask::NotAllowed,
    })
}

/// The length of the request head in `bytes` (through its blank line), if it is all there.
pub fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    crlf.into_iter().chain(lf).min()
}

/// Reads a request head before `deadline`, at most [`MAX_REQUEST`] bytes.
fn read_head(stream: &mut TcpStream, deadline: Deadline) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = head_end(&head) {
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > MAX_REQUEST {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a request head past the size limit",
            ));
        }
        stream.set_read_deadline(deadline.remaining("reading a scrape")?)?;
        match stream.read(&mut chunk) {
            // A client that ends its side after the request line is answered all the same.
            Ok(0) => return Ok(head),
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads one request and writes one response.
fn answer(
    mut stream: TcpStream,
    scrapes: &Sender<Sender<String>>,
    wake: &(dyn Fn() + Send + Sync),
    spoke: impl FnOnce(),
) -> io::Result<()> {
    let head = match read_head(&mut stream, Deadline::after(REQUEST_TIMEOUT)) {
        Ok(head) => {
            spoke();
            head
        }
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "a request head is at most 16 KiB\n",
            );
        }
        Err(e) => return Err(e),
    };
    let out = &mut stream;
    match parse_head(&head) {
        Ok(Ask::Metrics) => {
            let (reply, text) = mpsc::channel();
            if scrapes.send(reply).is_err() {
                return respond(out, "503 Service Unavailable", "the server is stopping\n");
            }
            wake();
            match text.recv_timeout(RENDER_TIMEOUT) {
                Ok(body) => respond(out, "200 OK", &body),
                Err(_) => respond(
                    out,
                    "503 Service Unavailable",
                    "no answer from the ring thread\n",
                ),
            }
        }
        Ok(Ask::NotFound) => respond(out, "404 Not Found", "metrics are at /metrics\n"),
        Ok(Ask::NotAllowed) => respond(out, "405 Method Not Allowed", "only GET /metrics\n"),
        Err(why) => respond(out, "400 Bad Request", &format!("{why}\n")),
    }
}

/// Writes a whole response before the deadline, however slowly the client reads.
fn respond(out: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    peer::write_all(
        out,
        &mut [IoSlice::new(head.as_bytes()), IoSlice::new(body.as_bytes())],
        Deadline::after(REQUEST_TIMEOUT),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_parse_into_what_they_ask_for() {
        assert_eq!(
            parse_head(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(Ask::Metrics)
        );
        assert_eq!(
            parse_head(b"GET /metrics?x=1 HTTP/1.0\n\n"),
            Ok(Ask::Metrics)
        );
        assert_eq!(parse_head(b"GET / HTTP/1.1\r\n\r\n"), Ok(Ask::NotFound));
        assert_eq!(
            parse_head(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Ok(Ask::NotAllowed)
        );
        assert!(parse_head(b"\xff\xfe").is_err());
        assert!(parse_head(b"").is_err());
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nrest"), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }
}
