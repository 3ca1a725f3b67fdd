//! Reading the files a user names (job files, spec files, traces, reports, components,
//! event files): regular files only, opened without blocking, and no larger than a limit
//! per kind. A FIFO cannot hang a command, and `/dev/zero` cannot fill its memory. And
//! [`Location`], the file and line (or option) an error names.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Where an option was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The job file, or "command line".
    pub source: String,
    /// 1-based line in a job file; 0 on the command line.
    pub line: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.source)
        } else {
            write!(f, "{}:{}", self.source, self.line)
        }
    }
}

/// Job files and device spec files.
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;
/// Traces to replay.
pub const MAX_TRACE_BYTES: u64 = 1 << 30;
/// JSON reports to plot.
pub const MAX_REPORT_BYTES: u64 = 256 << 20;

/// Opens `path` for reading if it is a regular file, without waiting for a FIFO's writer.
///
/// # Errors
/// It cannot be opened, or is not a regular file.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// The bytes of the regular file at `path`, if it holds at most `limit`.
///
/// # Errors
/// As [`open_regular`], or the file is larger than `limit`.
pub fn read_bytes(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let len = file.metadata()?.len();
    let too_large = |len: u64| {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("{len} bytes, past the limit of {} MiB", limit >> 20),
        )
    };
    if len > limit {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The text of the regular file at `path`, if it holds at most `limit` bytes of UTF-8.
///
/// # Errors
/// As [`read_bytes`], or the file is not UTF-8.
pub fn read_text(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_bytes(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_oversized_files_are_refused_without_reading_them() {
        let err = read_text(Path::new("/dev/zero"), MAX_CONFIG_BYTES).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let dir = std::env::temp_dir().join(format!("schedhost-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_text(&fifo, MAX_CONFIG_BYTES).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let big = dir.join("big");
        std::fs::write(&big, vec![b'a'; 2048]).unwrap();
        let err = read_text(&big, 1024).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(read_text(&big, 4096).unwrap().len(), 2048);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
