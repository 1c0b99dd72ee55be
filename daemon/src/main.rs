//! `bootc-daemon`: see lib.rs for the process model.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use clap::{Parser, Subcommand};
use daemon::{DaemonOptions, confinement::spawn::HelperOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(name = "bootc-daemon", version, about = "bootc-operator node agent")]
struct Cli {
    /// The helper binary (default: bootc-helper beside this binary).
    #[arg(long, env = "BOOTC_HELPER")]
    helper: Option<PathBuf>,
    /// The host's root as seen from here, for the inotify watch.
    #[arg(long, default_value = "/proc/1/root")]
    host_root: PathBuf,
    /// The process whose mount namespace is the host's (the helper runs bootc there).
    #[arg(long, default_value_t = 1)]
    host_pid: i32,
    /// Unprivileged uid to switch to: one no other process on the node uses
    /// (0 and 65534 are refused).
    #[arg(long, default_value_t = daemon::confinement::privdrop::DEFAULT_UID)]
    uid: u32,
    /// Unprivileged gid to switch to (0 and 65534 are refused).
    #[arg(long, default_value_t = daemon::confinement::privdrop::DEFAULT_GID)]
    gid: u32,
    /// A repository (`registry/path`) or namespace (`registry/path/`) the
    /// helper may stage images from; repeat for more, or separate with
    /// commas. Required: `any` allows every repository, explicitly.
    #[arg(
        long = "allowed-repository",
        value_name = "REPOSITORY",
        env = daemon::agent::repositories::ENV,
        value_delimiter = ','
    )]
    allowed_repositories: Vec<String>,
    /// Have bootc enforce the host's container signature policy
    /// (`bootc switch --enforce-container-sigpolicy`).
    #[arg(long, env = "BOOTC_ENFORCE_CONTAINER_SIGPOLICY")]
    enforce_container_sigpolicy: bool,
    /// How long the helper's Apply waits for an early bootc failure.
    #[arg(long, default_value_t = u64::try_from(proto::APPLY_WINDOW.as_millis()).unwrap_or(u64::MAX))]
    apply_window_ms: u64,
    /// The Node this daemon runs on (its BootcNode has the same name).
    #[arg(long, env = "NODE_NAME", default_value = "")]
    node_name: String,
    /// The operator's namespace (the controller's, not the daemon's own): the
    /// only one pull secrets are read from, each with one GET by name.
    #[arg(long, env = "BOOTC_NAMESPACE", default_value = api::labels::OPERATOR_NAMESPACE)]
    namespace: String,
    /// Fallback poll of the host's bootc status, in seconds.
    #[arg(long, default_value_t = daemon::agent::node_loop::DEFAULT_POLL_INTERVAL.as_secs())]
    poll_interval_secs: u64,
    /// While the host reports an automatic updater (a unit the controller
    /// refuses the node for), read the host again every this many seconds.
    #[arg(long, default_value_t = daemon::agent::node_loop::DEFAULT_UPDATER_RECHECK.as_secs())]
    host_updater_recheck_secs: u64,
    /// A kubeconfig instead of the in-cluster service account.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Test only: drop privilege, install the filter, make one system call.
    #[command(hide = true)]
    SeccompSelftest {
        /// Which layers to install after the drop (control runs: none).
        #[arg(long, default_value = "all")]
        layers: daemon::confinement::selftest::Layers,
        case: String,
    },
}

fn main() -> ExitCode {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let (filter, bad) = daemon::log_filter(std::env::var("RUST_LOG").ok().as_deref());
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false),
        )
        .with(filter)
        .init();
    if let Some(message) = bad {
        tracing::warn!(%message, "RUST_LOG not understood; logging at info");
    }
    let cli = Cli::parse();
    if let Some(Command::SeccompSelftest { case, layers }) = &cli.command {
        return daemon::confinement::selftest::run(case, cli.uid, cli.gid, *layers);
    }
    if cli.node_name.is_empty() {
        tracing::error!(
            "no node name: set NODE_NAME (the DaemonSet sets it from spec.nodeName) or --node-name"
        );
        return ExitCode::from(2);
    }
    let allowed = match daemon::agent::repositories::allow_list(&cli.allowed_repositories) {
        Ok(allowed) => allowed,
        Err(error) => {
            tracing::error!(%error, "refusing to start");
            return ExitCode::from(2);
        }
    };
    tracing::info!(repositories = ?allowed, sigpolicy = cli.enforce_container_sigpolicy, "images are staged only from the allowed repositories");
    let opts = DaemonOptions {
        helper: HelperOptions {
            path: cli
                .helper
                .unwrap_or_else(daemon::confinement::spawn::default_helper_path),
            host_pid: cli.host_pid,
            apply_window: Duration::from_millis(cli.apply_window_ms),
            allowed_repositories: allowed.repositories(),
            enforce_sigpolicy: cli.enforce_container_sigpolicy,
        },
        host_root: cli.host_root,
        uid: cli.uid,
        gid: cli.gid,
        kubeconfig: cli.kubeconfig,
        agent: daemon::agent::node_loop::LoopConfig {
            node_name: cli.node_name,
            operator_namespace: cli.namespace,
            poll_interval: Duration::from_secs(cli.poll_interval_secs.max(1)),
            landlock: None,
            updater_recheck: Duration::from_secs(cli.host_updater_recheck_secs.max(1)),
        },
    };
    daemon::run_daemon(&opts)
}
