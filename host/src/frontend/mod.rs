//! Front-ends: what feeds the engine bios and hears of them finishing. Fio jobs on a
//! simulated or a real device ([`jobs`]), recorded traces turned into jobs ([`replay`]), and
//! the NBD server ([`nbd`]). A finished run hands its [`outcome`] to the reports.

pub mod jobs;
pub mod nbd;
pub mod outcome;
pub mod replay;
