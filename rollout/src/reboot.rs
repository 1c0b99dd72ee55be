//! A reboot slot's life: the slots handed out ([`slots`]), each member's
//! [`verdict`] (its slot, drain and approval), the [`cordon`] a slot puts on
//! its Node, the Node told its stage ([`lifecycle`]), the Alertmanager
//! silences of the nodes in slots ([`silences`]), the health gate a
//! node passes on the target before its slot is released
//! ([`health_gate`]), and the deadline of each phase a node can be
//! [`stuck`] in.

pub mod cordon;
pub mod health_gate;
pub mod lifecycle;
pub mod silences;
pub mod slots;
pub mod stuck;
pub mod verdict;
