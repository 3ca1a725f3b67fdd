//! The event file: the magic `SCHEDEV1`, a header frame, then one frame per event. A frame is
//! its length (u32, little endian) and its postcard encoding.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Event;

const MAGIC: &[u8; 8] = b"SCHEDEV1";

/// A frame longer than this is not one this writer made.
const MAX_FRAME: u32 = 1 << 20;

/// What the file describes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The device the events happened on.
    pub device: String,
    /// The policy that scheduled them.
    pub policy: String,
}

/// Why an event file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The bytes are not an event file, or it was cut short.
    #[error("{path}: {what} at byte {offset}")]
    Format {
        /// The file.
        path: PathBuf,
        /// Where.
        offset: u64,
        /// What is wrong.
        what: String,
    },
}

/// Writes events as they come; buffered.
#[derive(Debug)]
pub struct Writer {
    out: BufWriter<File>,
    frame: Vec<u8>,
}

impl Writer {
    /// Creates `path` (which must not exist) and writes the header.
    ///
    /// # Errors
    /// The file exists or cannot be written.
    pub fn create(path: &Path, header: &Header) -> io::Result<Self> {
        let file = crate::output::create_new(path)?;
        let mut writer = Self {
            out: BufWriter::new(file),
            frame: Vec::new(),
        };
        writer.out.write_all(MAGIC)?;
        writer.frame(header)?;
        Ok(writer)
    }

    /// Appends `events`.
    ///
    /// # Errors
    /// Writing failed.
    pub fn write(&mut self, events: &[Event]) -> io::Result<()> {
        for event in events {
            self.frame(event)?;
        }
        Ok(())
    }

    /// Flushes what is buffered.
    ///
    /// # Errors
    /// Writing failed.
    pub fn finish(mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn frame<T: Serialize>(&mut self, value: &T) -> io::Result<()> {
        self.frame.clear();
        let bytes = postcard::to_extend(value, std::mem::take(&mut self.frame))
            .map_err(|e| io::Error::other(e.to_string()))?;
        self.out.write_all(&(bytes.len() as u32).to_le_bytes())?;
        self.out.write_all(&bytes)?;
        self.frame = bytes;
        Ok(())
    }
}

impl Header {
    /// The header with control characters escaped: a file's text reaches terminals, and
    /// an escape sequence planted in it must not act on one.
    fn printable(self) -> Self {
        Self {
            device: printable(&self.device),
            policy: printable(&self.policy),
        }
    }
}

pub use crate::output::printable;

/// Refuses an event file path that exists, before anything is set up: `--trace-events`
/// never overwrites a recording.
///
/// # Errors
/// The message for the user.
pub fn check_new(path: &Path) -> Result<(), String> {
    if path.symlink_metadata().is_ok() {
        return Err(format!(
            "--trace-events {}: the file exists; pick a new path",
            path.display()
        ));
    }
    Ok(())
}

/// The largest event file read (about 80 million events); past it a recording is refused.
/// Events are read one at a time ([`Reader`]), so this bounds the time a read takes, not
/// its memory.
pub const MAX_FILE_BYTES: u64 = 4 << 30;

/// An event file, read one event at a time: memory stays one frame's worth, whatever the
/// file's size.
#[derive(Debug)]
pub struct Reader {
    path: std::path::PathBuf,
    input: BufReader<File>,
    offset: u64,
    buf: Vec<u8>,
}

impl Reader {
    /// Opens `path` and reads its header.
    ///
    /// # Errors
    /// A [`ReadError`] naming the file, and the byte where it went wrong.
    pub fn open(path: &Path) -> Result<(Header, Self), ReadError> {
        let file = crate::input::open_regular(path).map_err(|source| ReadError::Io {
            path: path.to_owned(),
            source,
        })?;
        let mut reader = Self {
            path: path.to_owned(),
            input: BufReader::new(file),
            offset: 0,
            buf: Vec::new(),
        };
        let mut magic = [0u8; 8];
        reader
            .input
            .read_exact(&mut magic)
            .map_err(|_| reader.bad(0, "too short for an event file".into()))?;
        if &magic != MAGIC {
            return Err(reader.bad(0, "not a schedhost event file (no SCHEDEV1 magic)".into()));
        }
        reader.offset = 8;
        let at = reader.offset;
        let header = match next_frame(&mut reader.input, &mut reader.buf, &mut reader.offset) {
            Ok(Some(bytes)) => postcard::from_bytes::<Header>(bytes)
                .map(Header::printable)
                .map_err(|e| format!("header: {e}")),
            Ok(None) => Err("no header".into()),
            Err(what) => Err(what),
        }
        .map_err(|what| reader.bad(at, what))?;
        Ok((header, reader))
    }

    /// The next event, or `None` at the end of the file.
    ///
    /// # Errors
    /// A [`ReadError`] naming the byte where the file went wrong.
    pub fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        let at = self.offset;
        if at > MAX_FILE_BYTES {
            return Err(self.bad(
                at,
                format!(
                    "the file goes on past {} GiB, the limit for an event file",
                    MAX_FILE_BYTES >> 30
                ),
            ));
        }
        match next_frame(&mut self.input, &mut self.buf, &mut self.offset) {
            Ok(Some(bytes)) => match postcard::from_bytes(bytes) {
                Ok(event) => Ok(Some(event)),
                Err(e) => Err(self.bad(at, format!("event: {e}"))),
            },
            Ok(None) => Ok(None),
            Err(what) => Err(self.bad(at, what)),
        }
    }

    fn bad(&self, offset: u64, what: String) -> ReadError {
        ReadError::Format {
            path: self.path.clone(),
            offset,
            what,
        }
    }
}

/// Reads a whole event file into memory (for files known to be small; [`Reader`] streams).
///
/// # Errors
/// A [`ReadError`] naming the file, and the byte where it went wrong.
pub fn read(path: &Path) -> Result<(Header, Vec<Event>), ReadError> {
    let (header, mut reader) = Reader::open(path)?;
    let mut events = Vec::new();
    while let Some(event) = reader.next_event()? {
        events.push(event);
    }
    Ok((header, events))
}

/// The next frame's bytes, or `None` at a clean end of file.
fn next_frame<'b>(
    input: &mut impl Read,
    buf: &'b mut Vec<u8>,
    offset: &mut u64,
) -> Result<Option<&'b [u8]>, String> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err("the file ends inside a frame length".into()),
            Ok(n) => got += n,
            Err(e) => return Err(e.to_string()),
        }
    }
    let len = u32::from_le_bytes(len);
    if len > MAX_FRAME {
        return Err(format!("a frame of {len} bytes"));
    }
    buf.resize(len as usize, 0);
    input
        .read_exact(buf)
        .map_err(|_| "the file ends inside a frame".to_owned())?;
    *offset += 4 + u64::from(len);
    Ok(Some(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::events::Kind;

    fn event(kind: Kind, id: u64) -> Event {
        Event {
            at_ns: 1_000 * id,
            kind,
            ctx: 2,
            op: 1,
            sync: true,
            sector: 4096 * id,
            sectors: 8,
            id,
        }
    }

    #[test]
    fn escape_codes_in_a_header_are_escaped_when_read() {
        let dir = std::env::temp_dir().join(format!("schedhost-ev-esc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("e.bin");
        let header = Header {
            device: "\u{1b}]0;owned\u{7}/dev/x".into(),
            policy: "noop\u{1b}[2J".into(),
        };
        Writer::create(&path, &header).unwrap().finish().unwrap();
        let (read, _) = read(&path).unwrap();
        assert!(!read.device.contains('\u{1b}') && !read.policy.contains('\u{1b}'));
        assert_eq!(read.policy, "noop\\u{1b}[2J");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn events_round_trip_and_a_cut_file_is_named() {
        let dir = std::env::temp_dir().join(format!("schedhost-events-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.events");
        let header = Header {
            device: "sim:hdd".into(),
            policy: "noop".into(),
        };
        let events = vec![event(Kind::Queue, 1), event(Kind::Complete(-5), 2)];
        let mut w = Writer::create(&path, &header).unwrap();
        w.write(&events).unwrap();
        w.finish().unwrap();
        assert_eq!(read(&path).unwrap(), (header.clone(), events));
        assert!(Writer::create(&path, &header).is_err(), "never overwrites");
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("ends inside a frame"), "{err}");
        std::fs::write(&path, b"hello world").unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("magic"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
