//! Which log lines the daemon writes, from `RUST_LOG`.
//!
//! Not `tracing_subscriber::EnvFilter`: compiling its directives runs a
//! regular-expression engine whose code then stays resident, a few hundred
//! KiB of the daemon's memory to read a filter that never needs them.

use tracing_subscriber::filter::{LevelFilter, Targets};

/// The filter `spec` (the value of `RUST_LOG`) asks for: `LEVEL` or
/// `TARGET=LEVEL`, comma separated; info when unset or empty. A filter it
/// cannot read gives info, and why (for the log once it is set up).
pub fn log_filter(spec: Option<&str>) -> (Targets, Option<String>) {
    let info = || Targets::new().with_default(LevelFilter::INFO);
    match spec.map(str::trim).filter(|s| !s.is_empty()) {
        None => (info(), None),
        Some(spec) => match spec.parse::<Targets>() {
            Ok(targets) => (targets, None),
            Err(e) => (info(), Some(format!("RUST_LOG={spec:?}: {e}"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn levels_and_targets() {
        // (RUST_LOG, target, level, enabled, understood)
        let rows = [
            (None, "daemon", Level::INFO, true, true),
            (None, "daemon", Level::DEBUG, false, true),
            (Some(""), "kube", Level::INFO, true, true),
            (
                Some("debug"),
                "daemon::agent::node_loop",
                Level::DEBUG,
                true,
                true,
            ),
            (Some("warn"), "daemon", Level::INFO, false, true),
            (
                Some("info,kube=debug"),
                "kube::client",
                Level::DEBUG,
                true,
                true,
            ),
            (Some("info,kube=debug"), "daemon", Level::DEBUG, false, true),
            (Some("daemon=loud"), "daemon", Level::INFO, true, false),
            (Some("daemon=loud"), "daemon", Level::DEBUG, false, false),
        ];
        for (spec, target, level, enabled, understood) in rows {
            let (filter, bad) = log_filter(spec);
            assert_eq!(
                filter.would_enable(target, &level),
                enabled,
                "{spec:?} {target} {level}"
            );
            assert_eq!(bad.is_none(), understood, "{spec:?}: {bad:?}");
        }
        let (_, bad) = log_filter(Some("daemon=loud"));
        assert!(bad.unwrap().contains("daemon=loud"));
    }
}
