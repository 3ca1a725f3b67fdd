//! Front-ends: what feeds the engine bios and hears of them finishing. Fio jobs on a
//! simulated or a real device ([`jobs`]), recorded traces turned into jobs ([`replay`]), and
//! the NBD server ([`nbd`]). Every one runs under a [`plan::RunPlan`] and stops with a
//! [`RunError`]; [`run::run`] picks the backend for a job run. A finished run hands its
//! [`outcome`] to the reports.

mod error;
pub mod jobs;
pub mod nbd;
pub mod outcome;
pub mod plan;
pub mod replay;
pub mod ring;
pub mod run;

pub use error::RunError;
