//! What a fault's enabled check reads of the other parts.

use super::roles::Roles;
use super::wire::Wire;

/// What a fault's enabled check reads beyond its own part and the
/// context: whether faults have stopped, the wire (frames in flight,
/// connections) and the roles (faults that target one).
pub(in crate::execution) struct FaultGates<'x> {
    /// The fault period is calm: no fault is offered.
    pub calm: bool,
    /// Frames in flight, and the connections netsim follows.
    pub wire: &'x Wire,
    /// Who holds which role.
    pub roles: &'x Roles,
}
