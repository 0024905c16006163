//! A host-side TCP/IP endpoint on the simulated network, so a workload can
//! drive the cluster without booting a client VM.
//!
//! [`HostClient`] is a [smoltcp](https://docs.rs/smoltcp) interface bound to
//! a netsim node of its own (usually the id after the guests, see
//! [`HostConfig::after_guests`]). The engine moves Ethernet frames between
//! it and [`Network`](crate::Network) exactly as for a guest, and polls it at
//! the virtual times it asks for; the guests reach it through ordinary ARP,
//! which smoltcp answers. The workload uses a non-blocking API: open a TCP
//! connection, queue bytes, take received bytes, close, look at the state;
//! or hand over a whole HTTP/1.1 request and collect the response.
//!
//! Nothing here reads host time or host randomness, so a client is as
//! deterministic as the network: same seed, same calls, same frames.
//!
//! Modules: [`client`] (the client and the engine contract), [`conn`]
//! (connection states), [`http`] (request builders, response reader),
//! [`device`] (the frame queues smoltcp transmits into), [`error`].
//!
//! Behind the `host` feature (on by default), which is what pulls in smoltcp.
#![cfg(feature = "host")]

pub mod client;
pub mod conn;
pub mod device;
pub mod error;
pub mod http;

pub use client::{HostClient, HostConfig, HttpId};
pub use conn::{ConnError, ConnId, ConnState};
pub use error::HostError;
pub use http::{HttpError, HttpResponse};
