//! Argument parsing: clap for schedhost's own flags; fio job options (`--rw=randread`) are
//! taken out first and handed to the job parser, as fio itself accepts them.

use std::ffi::OsString;

use clap::{CommandFactory, Parser, Subcommand};

use crate::commands;

/// A user-space block I/O scheduler whose policies are sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(
    name = "schedhost",
    version,
    about,
    long_about = None,
    after_help = "Without a subcommand, `run` is assumed:\n  schedhost --policy deadline JOB.fio\n  schedhost --policy cfq --name=r --rw=randread --bs=4k --size=1g --numjobs=4"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run fio jobs through a policy on a device (the default subcommand).
    Run(commands::run::RunArgs),
    /// Work with policy components.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Run the same jobs under several policies and print a table (rows = sweep values).
    Compare(commands::compare::CompareArgs),
    /// Run the seed experiments (1, 2, 3, 4 or all) and print each table beside the seed's
    /// published numbers, with ratios and whether the seed's shape holds.
    Reproduce(commands::reproduce::ReproduceArgs),
    /// Measure the host's cost per request: noop as a component vs natively, on sim:null.
    Bench(commands::bench::BenchArgs),
    /// Talk to a running schedhost (--control SOCKET): swap, set, get, status, stats.
    Ctl(commands::ctl::CtlArgs),
    /// Export a file or block device over NBD; every client's I/O goes through the policy.
    Serve(Box<commands::serve::ServeArgs>),
    /// Print a `--trace-events` recording as blkparse-like text (replayable).
    Events(commands::events::EventsArgs),
    /// Draw SVG plots from JSON reports: latency CDFs, IOPS over time, compare tables.
    Plot(commands::plot::PlotArgs),
    /// Replay a drive's recorded service times on a simulated device and print the demerit
    /// figure (DiskSim's validation traces).
    Validate(commands::validate::ValidateArgs),
    /// Probe a real file or block device and write a simulated device spec that predicts it.
    Calibrate(commands::calibrate::CalibrateArgs),
    /// Turn a DiskSim drive (.diskspecs with its .model and .seek) into a device spec.
    ImportDisksim(commands::validate::ImportArgs),
    /// Replay a trace (blkparse text, fio iolog v2/v3): `schedhost replay TRACE [run options]`
    /// is `schedhost run --replay TRACE [run options]`.
    Replay {
        /// The trace file.
        trace: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print a policy's name, version, interface version and tunables.
    Inspect(commands::inspect::InspectArgs),
    /// Create a policy crate that builds outside this repository (the SDK vendored).
    New(commands::author::NewArgs),
    /// Build a policy crate into a component and print its path.
    Build(commands::author::BuildArgs),
    /// Check a policy against the host's contract on seeded simulated workloads.
    Check(Box<commands::check::CheckArgs>),
}

impl Command {
    pub fn execute(self, fio_options: Vec<String>) -> anyhow::Result<()> {
        match self {
            Command::Run(args) => args.execute(fio_options),
            Command::Compare(args) => args.execute(fio_options),
            _ if !fio_options.is_empty() => {
                anyhow::bail!(
                    "fio job options ({}) only apply to `run` and `compare`",
                    fio_options.join(" ")
                )
            }
            Command::Policy(PolicyCommand::Inspect(args)) => args.execute(),
            Command::Policy(PolicyCommand::New(args)) => args.execute(),
            Command::Policy(PolicyCommand::Build(args)) => args.execute(),
            Command::Policy(PolicyCommand::Check(args)) => (*args).execute(),
            Command::Bench(args) => args.execute(),
            Command::Reproduce(args) => args.execute(),
            Command::Validate(args) => args.execute(),
            Command::Calibrate(args) => args.execute(),
            Command::ImportDisksim(args) => args.execute(),
            Command::Ctl(args) => args.execute(),
            Command::Serve(args) => (*args).execute(),
            Command::Events(args) => args.execute(),
            Command::Plot(args) => args.execute(),
            // Rewritten to `run --replay` before parsing; reached only for `replay --help`.
            Command::Replay { trace } => {
                anyhow::bail!("use `schedhost replay {} [run options]`", trace.display())
            }
        }
    }
}

/// Inserts `run` when the first argument is not a subcommand.
pub fn with_default_subcommand(mut args: Vec<OsString>) -> Vec<OsString> {
    // `replay TRACE [options]` is `run --replay TRACE [options]`.
    if args.get(1).is_some_and(|a| a == "replay") {
        if args.get(2).is_some_and(|a| a == "--help" || a == "-h") {
            return args;
        }
        args[1] = "run".into();
        args.insert(2, "--replay".into());
        return args;
    }
    let first = args.get(1).and_then(|a| a.to_str());
    let known = |a: &str| {
        matches!(a, "help" | "-h" | "--help" | "-V" | "--version")
            || Cli::command().get_subcommands().any(|c| c.get_name() == a)
    };
    if first.is_none_or(|a| !known(a)) {
        args.insert(1.min(args.len()), "run".into());
    }
    args
}

/// fio job options schedhost understands on the command line.
pub const FIO_OPTIONS: &[&str] = &[
    "name",
    "rw",
    "readwrite",
    "rwmixread",
    "rwmixwrite",
    "bs",
    "blocksize",
    "size",
    "bssplit",
    "offset",
    "offset_increment",
    "numjobs",
    "iodepth",
    "runtime",
    "ramp_time",
    "time_based",
    "number_ios",
    "rate_iops",
    "rate",
    "random_distribution",
    "continue_on_error",
    "cgroup",
    "cgroup_weight",
    "write_lat_log",
    "write_bw_log",
    "write_iops_log",
    "log_avg_msec",
    "thinktime",
    "stonewall",
    "wait_for_previous",
    "new_group",
    "prio",
    "prioclass",
    "direct",
    "verify",
    "ioengine",
    "filename",
    "directory",
    "group_reporting",
    "description",
];

/// The message for clap's `error` if it is an unknown `--key[=value]` given to `run` or
/// `compare` that clap cannot match to one of schedhost's own flags: it is taken for a fio
/// option schedhost does not support, named as a job file names one, with the nearest
/// supported option. `None`: clap's own message says it better.
pub fn fio_typo(args: &[OsString], error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument || !takes_fio(args) {
        return None;
    }
    if error.get(ContextKind::SuggestedArg).is_some() {
        return None;
    }
    let Some(ContextValue::String(arg)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    let key = arg.strip_prefix("--")?.split('=').next()?;
    let nearest = FIO_OPTIONS
        .iter()
        .map(|o| (edit_distance(key, o), *o))
        .filter(|&(d, _)| d <= 2)
        .min()
        .map(|(_, o)| format!(" (did you mean `{o}`?)"))
        .unwrap_or_default();
    Some(format!(
        "command line: unsupported fio option `{key}`{nearest}"
    ))
}

/// Levenshtein distance, for suggesting an option.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// True iff the subcommand (after [`with_default_subcommand`]) takes fio options.
fn takes_fio(args: &[OsString]) -> bool {
    args.get(1).is_some_and(|a| a == "run" || a == "compare")
}

/// Separates `--fio_option=value` arguments from schedhost's own.
pub fn split_fio_options(args: Vec<OsString>) -> (Vec<OsString>, Vec<String>) {
    // Only `run` and `compare` take fio options; other subcommands keep their own flags
    // (`bench --iodepth=1` is bench's).
    if !takes_fio(&args) {
        return (args, Vec::new());
    }
    let mut own = Vec::new();
    let mut fio = Vec::new();
    for arg in args {
        let key = arg
            .to_str()
            .and_then(|a| a.strip_prefix("--"))
            .map(|a| a.split('=').next().unwrap_or(a));
        match (key, arg.to_str()) {
            (Some(key), Some(text)) if FIO_OPTIONS.contains(&key) => fio.push(text.to_owned()),
            _ => own.push(arg),
        }
    }
    (own, fio)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The long flags of `group`, a flattened clap group.
    fn longs_of(group: clap::Command) -> Vec<String> {
        group
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_owned))
            .collect()
    }

    /// Checks that each command on `paths` takes every flag in `shared`.
    fn each_takes(paths: &[&[&str]], shared: &[String]) {
        let cli = Cli::command();
        for path in paths {
            let mut command = &cli;
            for name in *path {
                command = command
                    .find_subcommand(name)
                    .expect("the subcommand exists");
            }
            let longs: Vec<&str> = command
                .get_arguments()
                .filter_map(|a| a.get_long())
                .collect();
            for flag in shared {
                assert!(
                    longs.contains(&flag.as_str()),
                    "{} lacks --{flag}",
                    path.join(" ")
                );
            }
        }
    }

    #[test]
    fn every_command_that_runs_io_takes_every_shared_run_flag() {
        let run_flags = longs_of(<commands::flags::RunFlags as clap::Args>::augment_args(
            clap::Command::new("run"),
        ));
        assert!(
            run_flags.len() >= 15,
            "the group holds the run flags: {run_flags:?}"
        );
        each_takes(
            &[
                &["run"],
                &["compare"],
                &["serve"],
                &["reproduce"],
                &["calibrate"],
                &["bench"],
                &["policy", "check"],
            ],
            &run_flags,
        );
        let policy_flags = longs_of(<commands::flags::PolicyFlags as clap::Args>::augment_args(
            clap::Command::new("policy"),
        ));
        assert_eq!(policy_flags, ["set", "swap-at", "control"]);
        each_takes(
            &[&["run"], &["compare"], &["serve"], &["policy", "check"]],
            &policy_flags,
        );
        each_takes(
            &[&["run"], &["compare"], &["serve"], &["policy", "check"]],
            &["output-format".to_owned()],
        );
    }

    #[test]
    fn a_mistyped_fio_option_is_named_as_a_fio_option_with_the_nearest_one() {
        let argv = |a: &[&str]| with_default_subcommand(a.iter().map(OsString::from).collect());
        let args = argv(&["schedhost", "--iodpth=4"]);
        let error = Cli::try_parse_from(&args).unwrap_err();
        let message = fio_typo(&args, &error).expect("a fio-style message");
        assert_eq!(
            message,
            "command line: unsupported fio option `iodpth` (did you mean `iodepth`?)"
        );
        let far = argv(&["schedhost", "--loops=2"]);
        let error = Cli::try_parse_from(&far).unwrap_err();
        assert_eq!(
            fio_typo(&far, &error).as_deref(),
            Some("command line: unsupported fio option `loops`")
        );
        // A typo of schedhost's own flag keeps clap's suggestion.
        let own = argv(&["schedhost", "--polcy", "noop"]);
        let error = Cli::try_parse_from(&own).unwrap_err();
        assert_eq!(fio_typo(&own, &error), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_is_the_default_subcommand_and_fio_options_are_split_off() {
        let argv: Vec<OsString> = [
            "schedhost",
            "--policy",
            "noop",
            "--rw=randread",
            "--bs=4k",
            "--seed",
            "3",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let (own, fio) = split_fio_options(with_default_subcommand(argv));
        assert_eq!(fio, vec!["--rw=randread", "--bs=4k"]);
        let cli = Cli::try_parse_from(own).expect("parses");
        assert!(matches!(cli.command, Command::Run(_)));
    }
}
