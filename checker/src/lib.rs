//! checker
pub mod history;
pub mod history_check;
pub mod linearizability;
pub mod shrink;
pub mod failure_file;
pub mod strategy;
pub mod reach;
pub mod trace;
pub mod report;
pub mod engine;
