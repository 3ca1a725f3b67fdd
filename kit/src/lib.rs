//! The policy author's kit, shared by `schedhost policy new|build` and `cargo xtask`:
//!
//! - [`scaffold`] writes a policy crate that builds outside this repository: the SDK and
//!   the WIT travel with it as a vendored copy (`vendor/`), so nothing but crates.io is
//!   needed to build it;
//! - [`toolchain`] finds a Rust that can target wasm32 on this machine, or says how to get one;
//! - [`build`] compiles a policy crate for wasm32 and turns the core module into a component;
//! - [`c`] does the same for a policy written in C.

pub mod build;
pub mod c;
mod files;
pub mod scaffold;
pub mod stamp;
pub mod toolchain;

pub use build::{Built, build_policy, componentize};
pub use scaffold::{Scaffolded, new_policy};
pub use toolchain::WasmToolchain;
