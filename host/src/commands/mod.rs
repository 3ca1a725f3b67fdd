//! One module per subcommand.

pub mod bench;
pub mod inspect;
pub mod run;
