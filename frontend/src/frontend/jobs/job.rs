//! fio jobs: the INI job file (`[global]` plus one section per job) and the same options on
//! the command line (`--name=a --rw=randread --bs=4k`). An option schedhost cannot honour is
//! an error naming it and where it was given, never a silent change of meaning.

use super::distribution::Distribution;
use super::value;
use crate::input::Location;

/// Access order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Pattern {
    /// Ascending offsets.
    Sequential,
    /// Every block of the region once per pass, in a seeded random order (fio's random map).
    Random,
}

/// Which directions a job issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Direction {
    /// Reads only.
    Read,
    /// Writes only.
    Write,
    /// Both, `rwmixread` percent reads.
    Mixed,
}

/// A job-file or option error, with where it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct JobError {
    /// Where.
    pub location: Location,
    /// What.
    pub message: String,
}

/// One fio job (before `numjobs` cloning).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JobSpec {
    /// Job name.
    pub name: String,
    /// Access order.
    pub pattern: Pattern,
    /// A random job's distribution over its blocks (`random_distribution`).
    pub distribution: Distribution,
    /// Which directions.
    pub direction: Direction,
    /// Percentage of reads when mixed (default 50).
    pub rwmixread: u32,
    /// Block size in bytes.
    pub bs: u32,
    /// fio's `bssplit`: block sizes (bytes) and the percentage of I/Os of each, adding up
    /// to 100; empty for `bs` alone. Offsets align to the smallest.
    pub bssplit: Vec<(u32, u32)>,
    /// Bytes of I/O per clone, and the size of its region.
    pub size: Option<u64>,
    /// Start of the region within the job's file.
    pub offset: u64,
    /// Clone n's region starts `n × offset_increment` further (clones then share a file).
    pub offset_increment: Option<u64>,
    /// Clones of this job, each its own submitter.
    pub numjobs: u32,
    /// I/Os in flight per clone.
    pub iodepth: u32,
    /// Stop after this long.
    pub runtime_ns: Option<u64>,
    /// Run this long before counting anything (fio's ramp_time); it adds to `runtime`.
    pub ramp_ns: u64,
    /// Repeat the region until `runtime`.
    pub time_based: bool,
    /// Stop after this many I/Os.
    pub number_ios: Option<u64>,
    /// Cap on I/Os per second per clone.
    pub rate_iops: Option<u64>,
    /// Cap on bytes per second per clone and direction (`rate=R` both, `rate=R,W`, `rate=,W`
    /// writes only), [read, write].
    pub rate_bytes: [Option<u64>; 2],
    /// fio's `cgroup=NAME`: the group its clones' I/O belongs to.
    pub cgroup: Option<String>,
    /// fio's `cgroup_weight=N` (1 to 10000): that group's io.weight.
    pub cgroup_weight: Option<u32>,
    /// The parameters of that group (from `--group NAME:…`), when it has them.
    pub group_limits: Option<crate::core::GroupSpec>,
    /// fio's per-job logs (`write_lat_log`, `write_bw_log`, `write_iops_log`,
    /// `log_avg_msec`).
    pub logs: crate::observe::stats::logs::LogSpec,
    /// Pause after each completion before the next I/O.
    pub thinktime_ns: u64,
    /// Wait for all earlier jobs to finish first (implies `new_group`).
    pub stonewall: bool,
    /// Start a new reporting group.
    pub new_group: bool,
    /// Report the job's group as one entry (fio's `group_reporting`).
    pub group_reporting: bool,
    /// Priority level 0–7.
    pub prio: Option<u8>,
    /// Priority class: 1 realtime, 2 best effort, 3 idle.
    pub prioclass: Option<u8>,
    /// File shared by clones and by jobs naming the same one.
    pub filename: Option<String>,
    /// `direct=1`: writes are synchronous. With `direct=0` writes are submitted as async
    /// (writeback) bios; there is no page cache, so reads still reach the device.
    pub direct: bool,
    /// `verify=crc32c`: writes carry a checksummed header, reads check it, and a verify pass
    /// reads back every block the job wrote.
    pub verify: bool,
    /// fio's `continue_on_error`: which failed I/O the job carries on after; any other
    /// stops it, as fio stops a job at its first error by default.
    pub continue_on_error: ContinueOn,
    /// A stream of a replayed trace: its I/Os replace the generated ones.
    #[serde(skip)]
    pub replay: Option<super::stream::ReplaySpec>,
    /// Where the job section began.
    #[serde(skip)]
    pub location: Location,
}

/// fio's `continue_on_error`: the failed I/O a job carries on after.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ContinueOn {
    /// Stop at the first error (fio's default).
    #[default]
    None,
    /// Carry on after failed reads.
    Read,
    /// Carry on after failed writes.
    Write,
    /// Carry on after failed reads and writes.
    Io,
    /// Carry on after verify failures only (a failed I/O still stops the job).
    Verify,
    /// Carry on after anything.
    All,
}

impl ContinueOn {
    fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "none" | "0" => Self::None,
            "read" => Self::Read,
            "write" => Self::Write,
            "io" => Self::Io,
            "verify" => Self::Verify,
            "all" | "1" => Self::All,
            _ => return None,
        })
    }

    /// True iff a failed I/O of `op` lets the job carry on.
    pub fn carries_on(self, op: schedhost_sdk::Op) -> bool {
        match self {
            Self::None | Self::Verify => false,
            Self::Read => op == schedhost_sdk::Op::Read,
            Self::Write => op != schedhost_sdk::Op::Read,
            Self::Io | Self::All => true,
        }
    }
}

impl JobSpec {
    pub(super) fn new(name: &str, location: Location) -> Self {
        Self {
            name: name.to_owned(),
            pattern: Pattern::Sequential,
            distribution: Distribution::Random,
            direction: Direction::Read,
            rwmixread: 50,
            bs: 4096,
            bssplit: Vec::new(),
            size: None,
            offset: 0,
            offset_increment: None,
            numjobs: 1,
            iodepth: 1,
            runtime_ns: None,
            ramp_ns: 0,
            time_based: false,
            number_ios: None,
            rate_iops: None,
            rate_bytes: [None; 2],
            logs: crate::observe::stats::logs::LogSpec::default(),
            cgroup: None,
            cgroup_weight: None,
            group_limits: None,
            thinktime_ns: 0,
            stonewall: false,
            new_group: false,
            group_reporting: false,
            prio: None,
            prioclass: None,
            filename: None,
            direct: true,
            verify: false,
            replay: None,
            location,
            continue_on_error: ContinueOn::None,
        }
    }

    /// A job for one stream of a replayed trace (the caller fills in the rest).
    pub fn for_replay(name: &str, location: Location) -> Self {
        Self::new(name, location)
    }

    /// Every block size the job issues: `bs`, or bssplit's.
    pub fn block_sizes(&self) -> Vec<u32> {
        if self.bssplit.is_empty() {
            vec![self.bs]
        } else {
            self.bssplit.iter().map(|&(bs, _)| bs).collect()
        }
    }

    /// The largest I/O the job issues, in bytes.
    pub fn largest_bs(&self) -> u32 {
        self.block_sizes().into_iter().max().unwrap_or(self.bs)
    }

    /// Percentage of I/Os that are reads.
    pub fn read_pct(&self) -> u32 {
        match self.direction {
            Direction::Read => 100,
            Direction::Write => 0,
            Direction::Mixed => self.rwmixread,
        }
    }

    /// fio's name for the rw mode.
    pub fn rw_name(&self) -> &'static str {
        match (self.pattern, self.direction) {
            (Pattern::Sequential, Direction::Read) => "read",
            (Pattern::Sequential, Direction::Write) => "write",
            (Pattern::Sequential, Direction::Mixed) => "rw",
            (Pattern::Random, Direction::Read) => "randread",
            (Pattern::Random, Direction::Write) => "randwrite",
            (Pattern::Random, Direction::Mixed) => "randrw",
        }
    }

    /// Changes one option after parsing (a `compare --sweep` step), checking the job again.
    ///
    /// # Errors
    /// The option's or the job's problem, as the parser would word it.
    pub fn set_option(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.apply(key, value)?;
        validate_job(self)
    }

    /// Applies one option.
    pub(super) fn apply(&mut self, key: &str, value: &str) -> Result<(), String> {
        let key = key.trim();
        match key {
            "name" => self.name = value.to_owned(),
            "rw" | "readwrite" => {
                let (pattern, direction) = match value {
                    "read" => (Pattern::Sequential, Direction::Read),
                    "write" => (Pattern::Sequential, Direction::Write),
                    "randread" => (Pattern::Random, Direction::Read),
                    "randwrite" => (Pattern::Random, Direction::Write),
                    "rw" | "readwrite" => (Pattern::Sequential, Direction::Mixed),
                    "randrw" => (Pattern::Random, Direction::Mixed),
                    other => {
                        return Err(format!(
                            "rw={other} is not supported (read, write, randread, randwrite, rw, randrw)"
                        ));
                    }
                };
                self.pattern = pattern;
                self.direction = direction;
            }
            "rwmixread" | "rwmixwrite" => {
                let pct = value::integer(value)?;
                if pct > 100 {
                    return Err(format!("{key}={value}: a percentage, 0 to 100"));
                }
                self.rwmixread = if key == "rwmixread" { pct } else { 100 - pct } as u32;
            }
            "bs" | "blocksize" => {
                if value.contains(',') {
                    return Err(format!(
                        "bs={value}: separate read/write block sizes are not supported; give one size"
                    ));
                }
                let bs = value::size(value)?;
                if bs == 0 || bs % 512 != 0 || bs > u64::from(u32::MAX) {
                    return Err(format!(
                        "bs={value}: a block size is a positive multiple of 512 bytes"
                    ));
                }
                self.bs = bs as u32;
            }
            "bssplit" => self.bssplit = parse_bssplit(value)?,
            "size" => self.size = Some(nonzero(key, value::size(value)?)?),
            "offset" => self.offset = value::size(value)?,
            "offset_increment" => self.offset_increment = Some(value::size(value)?),
            "numjobs" => self.numjobs = range(key, value, 1, 4096)? as u32,
            "iodepth" => self.iodepth = range(key, value, 1, 65536)? as u32,
            "runtime" => self.runtime_ns = Some(nonzero(key, value::duration_ns(value, "s")?)?),
            "ramp_time" => self.ramp_ns = value::duration_ns(value, "s")?,
            "time_based" => self.time_based = value::boolean(value)?,
            "number_ios" => self.number_ios = Some(nonzero(key, value::integer(value)?)?),
            "rate_iops" => self.rate_iops = Some(nonzero(key, value::integer(value)?)?),
            "rate" => self.rate_bytes = rates(key, value)?,
            "random_distribution" => self.distribution = Distribution::parse(value)?,
            "write_lat_log" | "write_bw_log" | "write_iops_log" => {
                let prefix = log_prefix(key, value)?;
                match key {
                    "write_lat_log" => self.logs.lat = prefix,
                    "write_bw_log" => self.logs.bw = prefix,
                    _ => self.logs.iops = prefix,
                }
            }
            "cgroup" => self.cgroup = Some(group_name(value)?),
            "cgroup_weight" => self.cgroup_weight = Some(range(key, value, 1, 10_000)? as u32),
            "log_avg_msec" => self.logs.avg_ns = range(key, value, 0, 3_600_000)? * 1_000_000,
            "thinktime" => self.thinktime_ns = value::duration_ns(value, "us")?,
            "stonewall" | "wait_for_previous" => self.stonewall = value::boolean(value)?,
            "new_group" => self.new_group = value::boolean(value)?,
            "group_reporting" => self.group_reporting = value::boolean(value)?,
            "prio" => self.prio = Some(range(key, value, 0, 7)? as u8),
            "prioclass" => self.prioclass = Some(range(key, value, 0, 3)? as u8),
            "direct" => self.direct = value::boolean(value)?,
            "filename" => self.filename = Some(value.to_owned()),
            "verify" => {
                self.verify = match value {
                    "crc32c" | "crc32c-intel" => true,
                    "0" | "none" => false,
                    other => {
                        return Err(format!(
                            "verify={other} is not supported (crc32c, or 0 for none)"
                        ));
                    }
                };
            }
            "continue_on_error" => {
                self.continue_on_error = ContinueOn::parse(value).ok_or_else(|| {
                    format!(
                        "continue_on_error={value} is not supported (none, read, write, io, verify, all, 0 or 1)"
                    )
                })?;
            }
            "ioengine" | "directory" | "description" => {}
            other => return Err(format!("unsupported fio option `{other}`")),
        }
        Ok(())
    }
}

/// fio's `rate=`: bytes a second for reads and for writes, `R` for both, `R,W` each, an
/// empty side unlimited (`rate=,1m` caps writes only).
fn rates(key: &str, value: &str) -> Result<[Option<u64>; 2], String> {
    let side = |text: &str| -> Result<Option<u64>, String> {
        if text.is_empty() {
            Ok(None)
        } else {
            Ok(Some(nonzero(key, value::size(text)?)?))
        }
    };
    let (read, write) = match value.split_once(',') {
        Some((r, w)) if !w.contains(',') => (side(r)?, side(w)?),
        Some(_) => {
            return Err(format!(
                "rate={value}: give READ,WRITE (trim rates are not supported)"
            ));
        }
        None => {
            let both = side(value)?;
            (both, both)
        }
    };
    if read.is_none() && write.is_none() {
        return Err(format!(
            "rate={value}: give a rate (bytes/s, e.g. rate=10m)"
        ));
    }
    Ok([read, write])
}

/// Checks a job's options together.
pub(super) fn validate_job(job: &JobSpec) -> Result<(), String> {
    let name = &job.name;
    if job.size.is_none() {
        return Err(format!(
            "job '{name}': set size= (the region each clone works on; there are no files to take it from)"
        ));
    }
    if job.time_based && job.runtime_ns.is_none() {
        return Err(format!("job '{name}': time_based needs runtime="));
    }
    if !job.bssplit.is_empty() && job.verify {
        return Err(format!(
            "job '{name}': bssplit= with verify= is not supported (verify checks blocks of one size)"
        ));
    }
    if let Some(size) = job.size
        && job.bssplit.iter().any(|&(bs, _)| u64::from(bs) > size)
    {
        return Err(format!(
            "job '{name}': a bssplit block size is larger than size={size}"
        ));
    }
    if let Some(size) = job.size
        && size < u64::from(job.bs)
    {
        return Err(format!(
            "job '{name}': size={size} is smaller than bs={}",
            job.bs
        ));
    }
    Ok(())
}

/// `4k/10:64k/50:32k/40`: block sizes and the percentage of I/Os of each, as fio reads
/// it; sizes without a percentage share what the others leave, equally.
fn parse_bssplit(value: &str) -> Result<Vec<(u32, u32)>, String> {
    if value.contains(',') {
        return Err(format!(
            "bssplit={value}: separate read and write splits are not supported; give one"
        ));
    }
    let mut given = Vec::new();
    for part in value.split(':').filter(|p| !p.trim().is_empty()) {
        let (size, pct) = part.split_once('/').unwrap_or((part, ""));
        let bytes = value::size(size).map_err(|e| format!("bssplit={value}: {e}"))?;
        if bytes == 0 || bytes % 512 != 0 || bytes > 64 << 20 {
            return Err(format!(
                "bssplit={value}: {size} is not a block size (a multiple of 512 bytes, at most 64 MiB)"
            ));
        }
        let pct =
            match pct.trim() {
                "" => None,
                p => Some(p.parse::<u32>().ok().filter(|&p| p <= 100).ok_or_else(|| {
                    format!("bssplit={value}: {p} is not a percentage (0 to 100)")
                })?),
            };
        given.push((bytes as u32, pct));
    }
    if given.is_empty() || given.len() > 64 {
        return Err(format!(
            "bssplit={value}: give 1 to 64 block sizes, SIZE/PERCENT:…"
        ));
    }
    let set: u32 = given.iter().filter_map(|(_, p)| *p).sum();
    if set > 100 {
        return Err(format!(
            "bssplit={value}: the percentages add up to {set}, over 100"
        ));
    }
    let open = given.iter().filter(|(_, p)| p.is_none()).count() as u32;
    if open == 0 && set != 100 {
        return Err(format!(
            "bssplit={value}: the percentages add up to {set}, not 100"
        ));
    }
    let left = 100 - set;
    let (share, mut extra) = (
        left.checked_div(open).unwrap_or(0),
        left.checked_rem(open).unwrap_or(0),
    );
    Ok(given
        .into_iter()
        .map(|(bs, pct)| {
            let pct = pct.unwrap_or_else(|| {
                let bonus = u32::from(extra > 0);
                extra = extra.saturating_sub(1);
                share + bonus
            });
            (bs, pct)
        })
        .filter(|&(_, pct)| pct > 0)
        .collect())
}

pub use crate::value::group_name;

/// A log's prefix: a file name prefix, relative to the working directory or absolute;
/// `0` (or empty) for none, as fio takes it.
fn log_prefix(key: &str, value: &str) -> Result<Option<String>, String> {
    if value.is_empty() || value == "0" {
        return Ok(None);
    }
    if value.len() > 1024 || value.chars().any(char::is_control) {
        return Err(format!(
            "{key}: a log prefix is a file name prefix of at most 1024 printable characters"
        ));
    }
    Ok(Some(value.to_owned()))
}

fn nonzero(key: &str, n: u64) -> Result<u64, String> {
    if n == 0 {
        Err(format!("{key} must be greater than 0"))
    } else {
        Ok(n)
    }
}

fn range(key: &str, value: &str, min: u64, max: u64) -> Result<u64, String> {
    let n = value::integer(value)?;
    if n < min || n > max {
        Err(format!("{key}={value} is out of range {min}..={max}"))
    } else {
        Ok(n)
    }
}
