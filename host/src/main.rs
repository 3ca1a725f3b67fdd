//! The `schedhost` command line. `run` is the default subcommand:
//! `schedhost --policy deadline JOB.fio` runs the job on the simulated HDD.

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;

fn main() -> ExitCode {
    let args = cli::with_default_subcommand(std::env::args_os().collect());
    let (args, fio_options) = cli::split_fio_options(args);
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            // A mistyped fio option is named as a job file's would be, not as a flag.
            if let Some(message) = cli::fio_typo(&args, &e) {
                eprintln!("schedhost: error: {message}");
                return ExitCode::from(2);
            }
            e.exit()
        }
    };
    init_tracing();
    match cli.command.execute(fio_options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // Errors quote their inputs (a job's name, a spec's line): escaped, never obeyed.
            let printable = |text: String| schedhost::output::printable_lines(&text);
            let mut said = vec![err.to_string()];
            eprintln!("schedhost: error: {}", printable(err.to_string()));
            for cause in err.chain().skip(1).map(ToString::to_string) {
                // A cause some context already quoted whole is said once.
                if said.iter().any(|s| s.contains(&cause)) {
                    continue;
                }
                eprintln!("  caused by: {}", printable(cause.clone()));
                said.push(cause);
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
