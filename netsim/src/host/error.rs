//! Errors of the host-side client.
//!
//! Two layers, because they reach the workload in two ways: a [`HostError`]
//! is returned synchronously by an API call that cannot be carried out (an
//! unknown handle, no free port), while a [`ConnError`] (beside the
//! connection state it ends, in `conn`) is what the network
//! did to a connection, discovered during a later `poll` and reported
//! through [`ConnState::Failed`](super::ConnState::Failed) or an HTTP result.

use super::conn::{ConnError, ConnId};

/// Why an API call of [`HostClient`](super::HostClient) was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The handle was never issued, or was released.
    #[error("unknown connection {0}")]
    UnknownConn(ConnId),
    /// The connection failed earlier; the operation cannot proceed.
    #[error("connection {id} failed: {err}")]
    Failed {
        /// The connection.
        id: ConnId,
        /// How it failed.
        err: ConnError,
    },
    /// `send` after `close`, or after the connection finished.
    #[error("connection {0} is closed for sending")]
    NotWritable(ConnId),
    /// Every ephemeral port (49152..=65535) is held by a live connection.
    #[error("no free ephemeral port")]
    NoFreePort,
    /// Port 0 is not a port.
    #[error("port 0 is not valid")]
    ZeroPort,
    /// The client's own node is not a connection target.
    #[error("cannot connect to own node {0}")]
    SelfConnect(crate::NodeId),
}
