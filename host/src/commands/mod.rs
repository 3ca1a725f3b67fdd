//! One module per subcommand.

pub mod bench;
pub mod compare;
pub mod ctl;
pub mod events;
pub mod inspect;
pub mod plot;
pub mod run;
pub mod serve;
