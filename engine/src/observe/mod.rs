//! Observation: what a run records while it runs. Per-submitter statistics and the live
//! line ([`stats`]), per-request events ([`events`]), Prometheus metrics ([`metrics`]), and
//! plots of finished runs' JSON reports ([`plot`]). The reports themselves read a finished
//! run's outcome, so they stand above the front-ends (the `schedhost` crate's `report`).

pub mod events;
pub mod metrics;
pub mod plot;
pub mod stats;
