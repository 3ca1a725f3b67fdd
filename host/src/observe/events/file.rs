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
        let file = File::options().write(true).create_new(true).open(path)?;
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

/// `text` with every control character written as an escape (`\u{1b}`).
pub fn printable(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

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
pub const MAX_FILE_BYTES: u64 = 4 << 30;

/// Reads a whole event file.
///
/// # Errors
/// A [`ReadError`] naming the file, and the byte where it went wrong.
pub fn read(path: &Path) -> Result<(Header, Vec<Event>), ReadError> {
    let file = crate::input::open_regular(path).map_err(|source| ReadError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mut input = BufReader::new(file);
    let mut offset = 0u64;
    let bad = |offset: u64, what: String| ReadError::Format {
        path: path.to_owned(),
        offset,
        what,
    };
    let mut magic = [0u8; 8];
    input
        .read_exact(&mut magic)
        .map_err(|_| bad(0, "too short for an event file".into()))?;
    if &magic != MAGIC {
        return Err(bad(
            0,
            "not a schedhost event file (no SCHEDEV1 magic)".into(),
        ));
    }
    offset += 8;
    let mut buf = Vec::new();
    let header: Header =
        match next_frame(&mut input, &mut buf, &mut offset).map_err(|w| bad(offset, w))? {
            Some(bytes) => postcard::from_bytes::<Header>(bytes)
                .map(Header::printable)
                .map_err(|e| bad(offset, format!("header: {e}")))?,
            None => return Err(bad(offset, "no header".into())),
        };
    let mut events = Vec::new();
    loop {
        let at = offset;
        // Every event is kept in memory: a file past the limit is refused, not followed.
        if at > MAX_FILE_BYTES {
            return Err(bad(
                at,
                format!(
                    "the file goes on past {} GiB, the limit for an event file",
                    MAX_FILE_BYTES >> 30
                ),
            ));
        }
        match next_frame(&mut input, &mut buf, &mut offset).map_err(|w| bad(at, w))? {
            Some(bytes) => events
                .push(postcard::from_bytes(bytes).map_err(|e| bad(at, format!("event: {e}")))?),
            None => return Ok((header, events)),
        }
    }
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
