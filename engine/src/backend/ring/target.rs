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

impl TargetKind {
    /// Its name in reports.
    pub fn label(self) -> &'static str {
        match self {
            Self::File => "File",
            Self::BlockDevice => "BlockDevice",
        }
    }
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
    /// The block device under it seeks (its queue's `rotational`; a file's is its file
    /// system's device's).
    pub rotational: bool,
    /// True iff this run created the file.
    pub created: bool,
    /// A file this run created is removed when the target is dropped before [`Self::keep`]:
    /// a run or server that fails while setting up leaves nothing behind.
    discard: bool,
    file: File,
}

impl Drop for Target {
    fn drop(&mut self) {
        if self.discard {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Bytes written at once laying a new file out.
const LAYOUT_CHUNK: usize = 1 << 20;

/// Writes `bytes` of pseudo-random data (from `seed`) over `file` from its start and makes
/// them durable, as fio lays a file out: reads of a sparse file never reach the device.
///
/// # Errors
/// The kernel's, writing or syncing.
pub fn lay_out(file: &File, bytes: u64, seed: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut chunk = vec![0u8; LAYOUT_CHUNK];
    let mut state = seed | 1;
    let mut at = 0u64;
    while at < bytes {
        super::buffers::fill_pseudo_random(&mut chunk, &mut state);
        let n = (bytes - at).min(LAYOUT_CHUNK as u64) as usize;
        file.write_all_at(&chunk[..n], at)?;
        at += n as u64;
    }
    file.sync_data()
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
    #[error(
        "{path} does not exist; jobs that only read do not create files (a job that writes lays a new file out first: --rw=write with the same --size)"
    )]
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
    /// A block device opened for writing is in use: mounted, or held by another program.
    #[error(
        "{path} is in use (mounted, part of a RAID or LVM volume, or held open exclusively by another program); refusing to write to it"
    )]
    Busy {
        /// The target.
        path: PathBuf,
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
        let opened = Self::open_inner(path, need, rules);
        // A file this call created and then could not use is not left behind.
        if let Err((created, _)) = &opened
            && *created
        {
            let _ = std::fs::remove_file(path);
        }
        opened.map_err(|(_, e)| e)
    }

    /// As [`Self::open`]; an error also says whether the file was created by then.
    fn open_inner(path: &Path, need: u64, rules: OpenRules) -> Result<Self, (bool, TargetError)> {
        let io_err = |action: &'static str| {
            let path = path.to_path_buf();
            move |source: io::Error| TargetError::Io {
                path,
                action,
                source,
            }
        };
        let before = |e| (false, e);
        let meta = match std::fs::metadata(path) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(before(io_err("reading its metadata")(e))),
        };
        let kind = match &meta {
            Some(m) if m.file_type().is_block_device() => TargetKind::BlockDevice,
            Some(m) if m.is_file() => TargetKind::File,
            Some(_) => {
                return Err(before(TargetError::NotUsable {
                    path: path.to_path_buf(),
                }));
            }
            None if rules.writes => TargetKind::File,
            None => {
                return Err(before(TargetError::Missing {
                    path: path.to_path_buf(),
                }));
            }
        };
        if meta.is_some() && rules.writes && !rules.allow_overwrite {
            return Err(before(TargetError::WouldOverwrite {
                path: path.to_path_buf(),
                what: match kind {
                    TargetKind::File => "file",
                    TargetKind::BlockDevice => "block device",
                },
            }));
        }
        let created = meta.is_none();
        let mut options = OpenOptions::new();
        options.read(true).write(rules.writes);
        if created {
            options.create_new(true);
        }
        let mut flags = if rules.direct { libc::O_DIRECT } else { 0 };
        // On a block device O_EXCL fails with EBUSY while it is mounted or otherwise
        // claimed, so a mounted filesystem is never written under the kernel's feet.
        if kind == TargetKind::BlockDevice && rules.writes {
            flags |= libc::O_EXCL;
        }
        options.custom_flags(flags);
        let mut file = match options.open(path) {
            Ok(file) => file,
            Err(e) if rules.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                return Err((
                    created,
                    TargetError::NoDirect {
                        path: path.to_path_buf(),
                    },
                ));
            }
            Err(e) if kind == TargetKind::BlockDevice && e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(before(TargetError::Busy {
                    path: path.to_path_buf(),
                }));
            }
            Err(e) => return Err(before(io_err("opening it")(e))),
        };
        let after = |e| (created, e);
        let mut capacity = file
            .seek(SeekFrom::End(0))
            .map_err(|e| after(io_err("finding its size")(e)))?;
        if capacity < need {
            if kind == TargetKind::File && rules.writes {
                file.set_len(need)
                    .map_err(|e| after(io_err("growing it to the jobs' size")(e)))?;
                capacity = need;
            } else {
                return Err(after(TargetError::TooSmall {
                    path: path.to_path_buf(),
                    have: capacity,
                    need,
                }));
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
            logical_block: queue_attribute(dev, "logical_block_size").unwrap_or(512),
            rotational: queue_attribute(dev, "rotational").is_none_or(|r: u8| r != 0),
            created,
            discard: created,
            file,
        })
    }

    /// Writes a file this run created whole, once, as fio lays out a new file ("Laying out
    /// IO file"): a file created sparse (or only `fallocate`d) answers reads of its holes
    /// without the device, so a job reading it would measure nothing. The bytes are
    /// pseudo-random, so no compressing or deduplicating layer skips them. Nothing else is
    /// written: an existing file or a block device is the user's as it is.
    ///
    /// # Errors
    /// The kernel's, reopening or writing the file.
    pub fn lay_out(&self, seed: u64) -> io::Result<()> {
        if !self.created || self.kind != TargetKind::File {
            return Ok(());
        }
        // The same inode as the descriptor, without O_DIRECT (whose buffers must be
        // aligned): a path someone renamed meanwhile is not followed.
        let file = OpenOptions::new()
            .write(true)
            .open(format!("/proc/self/fd/{}", self.file.as_raw_fd()))?;
        lay_out(&file, self.capacity, seed)
    }

    /// The first hole of this file within `0..end` (bytes), if it has one: reads of a hole
    /// never reach the device. `None` for a block device, or where the file system cannot
    /// say.
    pub fn first_hole(&self, end: u64) -> Option<u64> {
        if self.kind != TargetKind::File {
            return None;
        }
        let end = end.min(self.capacity);
        let fd = self.file.as_raw_fd();
        // SAFETY: lseek on a descriptor this target owns; SEEK_HOLE moves only its offset,
        // which the ring never uses (every I/O carries its own).
        let hole = unsafe { libc::lseek(fd, 0, libc::SEEK_HOLE) };
        u64::try_from(hole).ok().filter(|&h| h < end)
    }

    /// The run is under way: a file it created stays, whatever happens next.
    pub fn keep(&mut self) {
        self.discard = false;
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

/// Queue attribute `name` of block device `dev` from sysfs (a partition's is its disk's), if
/// sysfs has it: a file on a file system with no block device under it (tmpfs, overlay)
/// has none, and takes the callers' defaults (512-byte blocks, rotational).
fn queue_attribute<T: std::str::FromStr>(dev: u64, name: &str) -> Option<T> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let base = format!("/sys/dev/block/{major}:{minor}");
    [
        format!("{base}/queue/{name}"),
        format!("{base}/../queue/{name}"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
}
