//! Opening what the user named as a device: a regular file or a block device, with O_DIRECT,
//! sized for the jobs. Nothing is written that the user did not clearly ask to be written:
//! a job that writes may create a new file, but an existing file or any block device takes
//! `--allow-overwrite`.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What kind of thing the path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum TargetKind {
    /// A regular file.
    File,
    /// A block device.
    BlockDevice,
}

/// An open target.
#[derive(Debug)]
pub struct Target {
    /// As the user gave it.
    pub path: PathBuf,
    /// Its kind.
    pub kind: TargetKind,
    /// Bytes usable.
    pub capacity: u64,
    /// O_DIRECT alignment: offsets and lengths must be multiples of it.
    pub logical_block: u32,
    /// True iff this run created the file.
    pub created: bool,
    file: File,
}

/// How to open targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenRules {
    /// The jobs write.
    pub writes: bool,
    /// The user allowed writing over existing data.
    pub allow_overwrite: bool,
    /// Use O_DIRECT (fio's direct=1).
    pub direct: bool,
}

/// Why a target cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Writing would touch existing data without `--allow-overwrite`.
    #[error(
        "refusing to write to {path}: it is an existing {what} and its data would be overwritten; pass --allow-overwrite if that is intended"
    )]
    WouldOverwrite {
        /// The target.
        path: PathBuf,
        /// "file" or "block device".
        what: &'static str,
    },
    /// A read-only run on a path that does not exist.
    #[error("{path} does not exist; jobs that only read do not create files")]
    Missing {
        /// The target.
        path: PathBuf,
    },
    /// Neither a regular file nor a block device.
    #[error("{path} is not a regular file or a block device")]
    NotUsable {
        /// The target.
        path: PathBuf,
    },
    /// Too small for the jobs and not to be grown.
    #[error("{path} holds {have} bytes but the jobs need {need}")]
    TooSmall {
        /// The target.
        path: PathBuf,
        /// Its size.
        have: u64,
        /// What the placement needs.
        need: u64,
    },
    /// The filesystem refuses O_DIRECT.
    #[error(
        "{path}: the filesystem does not support O_DIRECT (tmpfs does not); set direct=0 in the jobs to go through the page cache"
    )]
    NoDirect {
        /// The target.
        path: PathBuf,
    },
    /// Any other system error.
    #[error("{path}: {action}: {source}")]
    Io {
        /// The target.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The error.
        source: io::Error,
    },
}

impl Target {
    /// Opens `path` for jobs that need `need` bytes, under `rules`.
    ///
    /// # Errors
    /// A [`TargetError`] saying what is wrong with the path.
    pub fn open(path: &Path, need: u64, rules: OpenRules) -> Result<Self, TargetError> {
        let io_err = |action: &'static str| {
            let path = path.to_path_buf();
            move |source: io::Error| TargetError::Io {
                path,
                action,
                source,
            }
        };
        let meta = match std::fs::metadata(path) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err("reading its metadata")(e)),
        };
        let kind = match &meta {
            Some(m) if m.file_type().is_block_device() => TargetKind::BlockDevice,
            Some(m) if m.is_file() => TargetKind::File,
            Some(_) => {
                return Err(TargetError::NotUsable {
                    path: path.to_path_buf(),
                });
            }
            None if rules.writes => TargetKind::File,
            None => {
                return Err(TargetError::Missing {
                    path: path.to_path_buf(),
                });
            }
        };
        if meta.is_some() && rules.writes && !rules.allow_overwrite {
            return Err(TargetError::WouldOverwrite {
                path: path.to_path_buf(),
                what: match kind {
                    TargetKind::File => "file",
                    TargetKind::BlockDevice => "block device",
                },
            });
        }
        let created = meta.is_none();
        let mut options = OpenOptions::new();
        options.read(true).write(rules.writes);
        if created {
            options.create_new(true);
        }
        if rules.direct {
            options.custom_flags(libc::O_DIRECT);
        }
        let mut file = match options.open(path) {
            Ok(file) => file,
            Err(e) if rules.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                if created {
                    let _ = std::fs::remove_file(path);
                }
                return Err(TargetError::NoDirect {
                    path: path.to_path_buf(),
                });
            }
            Err(e) => return Err(io_err("opening it")(e)),
        };
        let mut capacity = file
            .seek(SeekFrom::End(0))
            .map_err(io_err("finding its size"))?;
        if capacity < need {
            if kind == TargetKind::File && rules.writes {
                file.set_len(need)
                    .map_err(io_err("growing it to the jobs' size"))?;
                capacity = need;
            } else {
                return Err(TargetError::TooSmall {
                    path: path.to_path_buf(),
                    have: capacity,
                    need,
                });
            }
        }
        let dev = match (kind, &meta) {
            (TargetKind::BlockDevice, Some(m)) => m.rdev(),
            (_, Some(m)) => m.dev(),
            (_, None) => file.metadata().map(|m| m.dev()).unwrap_or(0),
        };
        Ok(Self {
            path: path.to_path_buf(),
            kind,
            capacity,
            logical_block: logical_block_size(dev),
            created,
            file,
        })
    }

    /// Makes written data durable (fdatasync), as a server does before it exits.
    ///
    /// # Errors
    /// The kernel's error from fdatasync.
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// The descriptor, for registering with the ring.
    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// The logical block size of block device `dev` from sysfs (a partition's is its disk's);
/// 512 if sysfs does not say.
fn logical_block_size(dev: u64) -> u32 {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let base = format!("/sys/dev/block/{major}:{minor}");
    [
        format!("{base}/queue/logical_block_size"),
        format!("{base}/../queue/logical_block_size"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
    .unwrap_or(512)
}
