//! One module per subcommand, and the arguments several of them share.

use clap::ValueEnum;

pub mod author;
pub mod bench;
pub mod calibrate;
pub mod check;
pub mod compare;
pub mod ctl;
pub mod events;
pub mod flags;
pub mod inspect;
pub mod plot;
pub mod reproduce;
pub mod run;
pub mod serve;
pub mod validate;

/// Report formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// fio-like text.
    Normal,
    /// fio-shaped JSON.
    Json,
    /// fio's json+: the JSON with each completion-latency histogram's bins (`run`; the
    /// other commands print their JSON).
    #[value(name = "json+")]
    JsonPlus,
}

/// `--set name=value`.
pub fn parse_setting(s: &str) -> Result<(String, i64), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: expected NAME=VALUE, e.g. --set fifo_batch=8"))?;
    let value: i64 = value
        .trim()
        .parse()
        .map_err(|_| format!("`{s}`: {name} takes an integer value"))?;
    Ok((name.trim().to_owned(), value))
}
