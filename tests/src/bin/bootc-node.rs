//! The supervisor of one real node container (see tests/src/nodes/supervisor.rs):
//! `bootc-node <spec.json>`.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write;

fn main() {
    let result = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: bootc-node <spec.json>"))
        .and_then(|path| Ok(serde_json::from_slice(&std::fs::read(path)?)?))
        .and_then(|spec| tests::nodes::supervisor::run(&spec));
    if let Err(e) = result {
        let _ = writeln!(std::io::stderr(), "bootc-node: {e:#}");
        std::process::exit(1);
    }
}
