//! The `schedhost` command line. `run` is the default subcommand:
//! `schedhost --policy deadline JOB.fio` runs the job on the simulated HDD.

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;

fn main() -> ExitCode {
    let args = cli::with_default_subcommand(std::env::args_os().collect());
    let (args, fio_options) = cli::split_fio_options(args);
    let cli = cli::Cli::parse_from(args);
    init_tracing();
    match cli.command.execute(fio_options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // Errors quote their inputs (a job's name, a spec's line): escaped, never obeyed.
            let printable = |text: String| schedhost::output::printable_lines(&text);
            eprintln!("schedhost: error: {}", printable(err.to_string()));
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {}", printable(cause.to_string()));
            }
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SCHEDHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
