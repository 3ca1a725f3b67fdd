//! `serve --metrics ADDR`: Prometheus metrics over HTTP. A thread answers `GET /metrics`;
//! the ring thread, which owns the counters, renders the text between two batches of I/O
//! (as it answers control requests), so the hot path never takes a lock for them.

pub mod exposition;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

/// Longest wait for the ring thread to render a scrape.
const RENDER_TIMEOUT: Duration = Duration::from_secs(5);

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
            .spawn(move || serve(&listener, &sender, wake.as_ref(), &stopped))?;
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

/// Answers one HTTP client at a time until the endpoint is dropped.
fn serve(
    listener: &TcpListener,
    scrapes: &Sender<Sender<String>>,
    wake: &(dyn Fn() + Send + Sync),
    stop: &AtomicBool,
) {
    for stream in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(stream) = stream else { continue };
        if answer(stream, scrapes, wake).is_err() {
            tracing::debug!("a metrics client went away");
        }
    }
}

/// Reads one request and writes one response.
fn answer(
    stream: TcpStream,
    scrapes: &Sender<Sender<String>>,
    wake: &(dyn Fn() + Send + Sync),
) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.by_ref().take(8192).read_line(&mut request_line)?;
    // Skip the headers; a scrape carries no body.
    let mut header = String::new();
    for _ in 0..100 {
        header.clear();
        if reader.by_ref().take(8192).read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
    }
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let mut out = stream;
    match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => {
            let (reply, text) = mpsc::channel();
            if scrapes.send(reply).is_err() {
                return respond(
                    &mut out,
                    "503 Service Unavailable",
                    "the server is stopping\n",
                );
            }
            wake();
            match text.recv_timeout(RENDER_TIMEOUT) {
                Ok(body) => respond(&mut out, "200 OK", &body),
                Err(_) => respond(
                    &mut out,
                    "503 Service Unavailable",
                    "no answer from the ring thread\n",
                ),
            }
        }
        ("GET", _) => respond(&mut out, "404 Not Found", "metrics are at /metrics\n"),
        _ => respond(&mut out, "405 Method Not Allowed", "only GET /metrics\n"),
    }
}

fn respond(out: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    out.flush()
}
