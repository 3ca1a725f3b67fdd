//! A server's exports: which devices they name, which group each export's clients are in,
//! checked before anything is opened, and what the handshake offers for each.

use std::path::{Path, PathBuf};

use super::decide::ExportBounds;
use super::handshake::Export;
use super::{CHUNK, MAX_PAYLOAD, ServeOptions, wire};
use crate::backend::ring::Target;
use crate::frontend::RunError;

/// One export as asked for: a name clients choose it by, the file or block device behind
/// it, and the group its clients' I/O is in. Several exports may name one device: they
/// share its scheduler, as tenants of one disk do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSpec {
    /// Its name; clients asking for the default (empty) name get the first export.
    pub name: String,
    /// The file or block device exported.
    pub device: PathBuf,
    /// Refuse writes, trims and zeroing to this export.
    pub read_only: bool,
    /// The group (a `--group` name, or a new unlimited group of the default weight) every
    /// client of this export is in; `None`: none.
    pub group: Option<String>,
}

/// True iff `a` and `b` name one device: the same path, the same file however it is
/// reached (a link, a hard link: the same `(st_dev, st_ino)`), the same block device
/// through two nodes (the same `st_rdev`), or a file still to be created by the folder it
/// will be in.
pub(super) fn same_device(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (Identity::of(a), Identity::of(b)) {
        (Some(a), Some(b)) => a == b,
        // One exists and the other does not: two files.
        (Some(_), None) | (None, Some(_)) => false,
        (None, None) => to_be_created(a).is_some_and(|a| to_be_created(b) == Some(a)),
    }
}

/// What makes a file one file: its inode, or for a block device the device it names.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    Inode(u64, u64),
    BlockDevice(u64),
}

impl Identity {
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let meta = std::fs::metadata(path).ok()?;
        Some(if meta.file_type().is_block_device() {
            Self::BlockDevice(meta.rdev())
        } else {
            Self::Inode(meta.dev(), meta.ino())
        })
    }
}

/// Where a file not yet created will be: its folder's canonical path and its name.
fn to_be_created(path: &Path) -> Option<PathBuf> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.canonicalize().ok()?,
        _ => std::env::current_dir().ok()?,
    };
    Some(parent.join(path.file_name()?))
}

/// Exports one server offers at most (so a group's index fits its u16).
const MAX_EXPORTS: usize = 1024;

/// Longest export name: NBD strings a server sends are at most 4096 bytes.
const MAX_EXPORT_NAME: usize = 4096;

/// How the exports map onto devices (lanes) and groups, checked before anything is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    /// Per device (lane), in [`ServeOptions::devices`] order: opened read-only, and its
    /// groups.
    pub(super) lanes: Vec<LaneLayout>,
    /// Per export: its lane, and its group there (an index into the lane's groups).
    pub(super) placed: Vec<(usize, Option<u16>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LaneLayout {
    pub(super) path: PathBuf,
    /// Every export on it is read-only: it is opened so.
    pub(super) read_only: bool,
    pub(super) groups: Vec<crate::core::GroupSpec>,
}

/// Checks the exports and groups of `options` and places each export.
///
/// # Errors
/// No export; an export named twice, empty or too long; a `--group` named twice or named
/// by no export.
pub(super) fn layout(options: &ServeOptions) -> Result<Layout, String> {
    if options.exports.is_empty() {
        return Err(
            "nothing to export: give --device PATH or --export name=NAME,device=PATH".into(),
        );
    }
    if options.exports.len() > MAX_EXPORTS {
        return Err(format!(
            "{} exports: one server offers at most {MAX_EXPORTS}",
            options.exports.len()
        ));
    }
    for (i, export) in options.exports.iter().enumerate() {
        if export.name.is_empty() || export.name.len() > MAX_EXPORT_NAME {
            return Err(format!(
                "export {:?}: a name is 1 to {MAX_EXPORT_NAME} bytes",
                export.name
            ));
        }
        if options.exports[..i].iter().any(|e| e.name == export.name) {
            return Err(format!("export {:?} is named twice", export.name));
        }
    }
    for (i, group) in options.groups.iter().enumerate() {
        if options.groups[..i].iter().any(|g| g.name == group.name) {
            return Err(format!("group {:?} is given twice (--group)", group.name));
        }
        if !options
            .exports
            .iter()
            .any(|e| e.group.as_deref() == Some(group.name.as_str()))
        {
            return Err(format!(
                "group {:?}: no export is in it (add group={} to an --export)",
                group.name, group.name
            ));
        }
    }
    let mut lanes: Vec<LaneLayout> = options
        .devices()
        .into_iter()
        .map(|path| LaneLayout {
            path,
            read_only: true,
            groups: Vec::new(),
        })
        .collect();
    let mut placed = Vec::new();
    for export in &options.exports {
        let lane = lanes
            .iter()
            .position(|l| same_device(&l.path, &export.device))
            .expect("every export's device is among the devices");
        let layout = &mut lanes[lane];
        layout.read_only &= export.read_only;
        let group = export.group.as_ref().map(|name| {
            let index = match layout.groups.iter().position(|g| &g.name == name) {
                Some(index) => index,
                None => {
                    // A group without --group is an unlimited peer, as a job's cgroup= is.
                    let spec = options
                        .groups
                        .iter()
                        .find(|g| &g.name == name)
                        .cloned()
                        .unwrap_or_else(|| crate::core::GroupSpec {
                            name: name.clone(),
                            ..crate::core::GroupSpec::default()
                        });
                    layout.groups.push(spec);
                    layout.groups.len() - 1
                }
            };
            u16::try_from(index).expect("at most MAX_EXPORTS groups a lane")
        });
        placed.push((lane, group));
    }
    Ok(Layout { lanes, placed })
}

/// An export as the server offers it: what the handshake says, what requests must respect,
/// and where its clients' I/O goes.
#[derive(Debug, Clone)]
pub(super) struct Offered {
    pub(super) export: Export,
    pub(super) limits: ExportBounds,
    /// The lane (device) its bios go to.
    pub(super) lane: usize,
    /// Its clients' group on that lane.
    pub(super) group: Option<u16>,
    /// Whose share of the server's buffer slots its clients take (see `pool`).
    pub(super) tenant: usize,
}

/// Each export's tenant, from where the layout placed it, and how many there are: the
/// exports in one group on one device are one tenant (a limit binds them together), and an
/// export in no group is a tenant of its own.
pub(super) fn tenants(placed: &[(usize, Option<u16>)]) -> (Vec<usize>, usize) {
    let mut keys: Vec<(usize, Option<u16>, usize)> = Vec::new();
    let of = placed
        .iter()
        .enumerate()
        .map(|(export, &(lane, group))| {
            // An ungrouped export's key is its own index, so it matches no other.
            let key = (lane, group, if group.is_some() { 0 } else { export });
            match keys.iter().position(|k| *k == key) {
                Some(tenant) => tenant,
                None => {
                    keys.push(key);
                    keys.len() - 1
                }
            }
        })
        .collect();
    (of, keys.len())
}

/// One export, once the server stopped.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportSummary {
    /// Its name.
    pub name: String,
    /// The file or device behind it.
    pub device: String,
    /// Bytes.
    pub size: u64,
    /// Writes were refused.
    pub read_only: bool,
    /// Its clients' group.
    pub group: Option<String>,
}

/// What the handshake offers and what requests must respect, for export `spec` on `target`.
pub(super) fn describe(
    options: &ServeOptions,
    spec: &ExportSpec,
    target: &Target,
) -> Result<(Export, ExportBounds), RunError> {
    let block = target.logical_block.max(512);
    let size = target.capacity - target.capacity % u64::from(block);
    if size == 0 {
        return Err(RunError::Setup(format!(
            "{} holds less than one {block}-byte block: nothing to export",
            spec.device.display()
        )));
    }
    let export = Export {
        name: spec.name.clone(),
        description: options.description.clone().unwrap_or_default(),
        size,
        flags: export_flags(spec.read_only),
        min_block: block,
        preferred_block: CHUNK,
        max_block: MAX_PAYLOAD,
    };
    let limits = ExportBounds {
        size,
        block,
        max_payload: MAX_PAYLOAD,
        read_only: spec.read_only,
    };
    Ok((export, limits))
}

/// Transmission flags: flush always; FUA, trim and zeroing when writable; multi-conn since
/// every connection reaches the same file and a flush covers all of them.
fn export_flags(read_only: bool) -> u16 {
    let base = wire::TX_HAS_FLAGS | wire::TX_SEND_FLUSH | wire::TX_CAN_MULTI_CONN;
    if read_only {
        base | wire::TX_READ_ONLY
    } else {
        base | wire::TX_SEND_FUA | wire::TX_SEND_TRIM | wire::TX_SEND_WRITE_ZEROES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::nbd::Address;

    fn options(exports: &[(&str, &str, Option<&str>)], groups: &[&str]) -> ServeOptions {
        ServeOptions {
            address: Address::Unix("/nonexistent/nbd.sock".into()),
            exports: exports
                .iter()
                .map(|&(name, device, group)| ExportSpec {
                    name: name.into(),
                    device: device.into(),
                    read_only: name.starts_with("ro"),
                    group: group.map(Into::into),
                })
                .collect(),
            allow_overwrite: false,
            size: None,
            trace_events: None,
            metrics: None,
            max_clients: 1,
            handshake_timeout: std::time::Duration::from_secs(1),
            reply_timeout: std::time::Duration::from_secs(1),
            description: None,
            groups: groups
                .iter()
                .map(|g| crate::value::parse_group(g).unwrap())
                .collect(),
        }
    }

    #[test]
    fn exports_on_one_device_share_a_lane_and_each_device_has_its_own_groups() {
        let o = options(
            &[
                ("a", "/x/one.img", Some("gold")),
                ("ro-b", "/x/one.img", Some("peer")),
                ("ro-c", "/x/two.img", Some("gold")),
                ("d", "/x/two.img", None),
            ],
            &["gold:weight=300,riops=10"],
        );
        let layout = layout(&o).unwrap();
        assert_eq!(
            layout.placed,
            [(0, Some(0)), (0, Some(1)), (1, Some(0)), (1, None)]
        );
        let one = &layout.lanes[0];
        let names: Vec<&str> = one.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["gold", "peer"]);
        assert_eq!(one.groups[0].riops, Some(10), "--group's parameters");
        assert_eq!(
            one.groups[1].weight, 100,
            "a group without --group is a peer"
        );
        assert!(
            !one.read_only,
            "a writable export opens its device writable"
        );
        assert_eq!(layout.lanes[1].groups.len(), 1);
    }

    #[test]
    fn exports_and_groups_that_do_not_fit_are_named() {
        let twice = options(&[("a", "/x", None), ("a", "/y", None)], &[]);
        assert!(layout(&twice).unwrap_err().contains("\"a\" is named twice"));
        let orphan = options(&[("a", "/x", None)], &["g:weight=2"]);
        assert!(
            layout(&orphan)
                .unwrap_err()
                .contains("group \"g\": no export")
        );
        let group_twice = options(&[("a", "/x", Some("g"))], &["g:weight=2", "g:weight=3"]);
        assert!(layout(&group_twice).unwrap_err().contains("given twice"));
        let unnamed = options(&[("", "/x", None)], &[]);
        assert!(layout(&unnamed).unwrap_err().contains("1 to 4096 bytes"));
    }

    #[test]
    fn hard_links_and_symlinks_to_one_file_are_one_device_and_one_lane() {
        let dir =
            std::env::temp_dir().join(format!("schedhost-same-device-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("data.img");
        std::fs::write(&file, [0u8; 4096]).unwrap();
        let hard = dir.join("hard.img");
        std::fs::hard_link(&file, &hard).unwrap();
        let soft = dir.join("soft.img");
        std::os::unix::fs::symlink(&file, &soft).unwrap();
        let other = dir.join("other.img");
        std::fs::write(&other, [0u8; 4096]).unwrap();
        assert!(same_device(&file, &hard), "a hard link");
        assert!(same_device(&soft, &hard), "a symlink and a hard link");
        assert!(!same_device(&file, &other), "two files");
        assert!(
            !same_device(&file, &dir.join("new.img")),
            "a file and one to create"
        );
        assert!(same_device(
            &dir.join("new.img"),
            &dir.join(".").join("new.img")
        ));
        let path = |p: &Path| p.to_str().unwrap().to_owned();
        let (a, b) = (path(&file), path(&hard));
        let o = options(
            &[("a", &a, Some("g")), ("b", &b, Some("g"))],
            &["g:riops=50"],
        );
        let layout = layout(&o).unwrap();
        assert_eq!(layout.lanes.len(), 1, "one scheduler, one limit");
        assert_eq!(layout.placed, [(0, Some(0)), (0, Some(0))]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_group_on_a_device_is_one_tenant_and_an_ungrouped_export_is_its_own() {
        let placed = [
            (0, Some(0)),
            (0, Some(0)),
            (0, None),
            (0, None),
            (1, Some(0)),
        ];
        assert_eq!(tenants(&placed), (vec![0, 0, 1, 2, 3], 4));
    }
}
