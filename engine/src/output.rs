//! Writing the files a user names where the promise is "never over an existing file": the
//! file is created by the same call that checks it is new (`O_CREAT | O_EXCL`), and a
//! symbolic link in its place, dangling or not, is refused rather than followed. A check by
//! name followed by a write by name would let a file (or a link) that appeared in between
//! be overwritten.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Creates `path` for writing; fails if anything, a link included, is already there.
///
/// # Errors
/// `AlreadyExists` for an existing entry; other errors as `open(2)` gives them.
pub fn create_new(path: &Path) -> io::Result<File> {
    File::options()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o644)
        .open(path)
}

/// Writes `bytes` to the new file `path`.
///
/// # Errors
/// A message naming the path: it exists (give a new name), or the write failed.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut file = create_new(path).map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => {
            format!("{} exists; give a new file name", path.display())
        }
        _ => format!("creating {}: {e}", path.display()),
    })?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// `text` with every control character written as an escape (`\u{1b}`): text from an
/// input (a trace's command names, a job's section names, a policy's own name) must not
/// act on the terminal it reaches.
pub fn printable(text: &str) -> String {
    escaped(text, |_| false)
}

/// As [`printable`], keeping line breaks and tabs: for whole reports and messages.
pub fn printable_lines(text: &str) -> String {
    escaped(text, |c| c == '\n' || c == '\t')
}

fn escaped(text: &str, keep: impl Fn(char) -> bool) -> String {
    if !text.chars().any(|c| c.is_control() && !keep(c)) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_control() && !keep(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_line_breaks_kept_where_asked() {
        let hostile = "job\u{1b}]0;pwned\u{7}\nnext\r";
        assert_eq!(printable(hostile), "job\\u{1b}]0;pwned\\u{7}\\nnext\\r");
        assert_eq!(
            printable_lines(hostile),
            "job\\u{1b}]0;pwned\\u{7}\nnext\\r"
        );
        assert_eq!(printable_lines("plain\ttext\n"), "plain\ttext\n");
    }

    #[test]
    fn a_dangling_link_is_refused_and_its_target_never_created() {
        let dir = std::env::temp_dir().join(format!("schedhost-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("target.spec");
        let link = dir.join("link.spec");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = write_new(&link, b"x").unwrap_err();
        assert!(err.contains("exists"), "{err}");
        assert!(!target.exists(), "the link's target was created");
        let plain = dir.join("plain.spec");
        let _ = std::fs::remove_file(&plain);
        write_new(&plain, b"first").unwrap();
        assert!(write_new(&plain, b"second").is_err());
        assert_eq!(std::fs::read(&plain).unwrap(), b"first");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
