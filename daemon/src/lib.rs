//! bootc-daemon: the unprivileged node agent, in two rooms:
//! [`confinement`] (the helper's spawn, the privilege drop, the Landlock
//! sandbox, the seccomp filter and its self-test: what a security
//! reviewer reads) and [`agent`] (what runs once confined: the node loop,
//! its state machine, the host watch, the helper's client, pull secrets,
//! repositories, bootc's error texts, credentials).
//!
//! Process model (SECURITY.md section 2): `main` stays single-threaded while it
//! creates a socketpair, forks and execs `bootc-helper` with one end as fd 3,
//! opens the inotify watch on the host's `ostree/bootc`, drops every
//! privilege ([`privdrop`]) and installs the seccomp allow-list
//! ([`seccomp`]); only then does it start tokio and run [`agent::run`] with a
//! client of the helper ([`helper_client::connect`]) and the watch
//! ([`watch::HostEvents`]). If the helper exits, the daemon exits non-zero;
//! if the daemon dies, the helper exits (it watches a pidfd of the daemon:
//! the kernel refuses PR_SET_PDEATHSIG from the unprivileged daemon to it).
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod agent;
pub mod confinement;
mod log_filter;

use std::path::PathBuf;
use std::process::ExitCode;

pub use log_filter::log_filter;

use agent::{helper_client, kubeconf, node_loop, watch};
use confinement::{confine, privdrop, sandbox, seccomp, spawn};

/// Exit code when the helper died.
pub const EXIT_HELPER_DIED: u8 = 3;
/// Exit code when the loop failed.
pub const EXIT_AGENT_FAILED: u8 = 4;
/// Exit code when start-up (spawn, watch, drop, filter) failed.
pub const EXIT_STARTUP: u8 = 5;

/// Everything the daemon is configured with.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    pub helper: spawn::HelperOptions,
    /// The host's filesystem root as the daemon sees it (`/proc/1/root`).
    pub host_root: PathBuf,
    /// The unprivileged ids the daemon switches to.
    pub uid: u32,
    pub gid: u32,
    /// A kubeconfig to use instead of the in-cluster service account.
    pub kubeconfig: Option<PathBuf>,
    /// The loop's settings (node name, operator namespace, poll interval).
    pub agent: node_loop::LoopConfig,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Drop(#[from] privdrop::DropError),
    #[error(transparent)]
    Spawn(#[from] spawn::SpawnError),
    #[error(transparent)]
    Watch(#[from] watch::WatchError),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
    #[error("tokio: {0}")]
    Runtime(#[from] std::io::Error),
    #[error(transparent)]
    Connect(#[from] helper_client::ConnectError),
    #[error(transparent)]
    Kube(#[from] kubeconf::KubeconfError),
}

/// The daemon's whole life. Returns the process exit code.
pub fn run_daemon(opts: &DaemonOptions) -> ExitCode {
    match start(opts) {
        Ok(code) => code,
        Err(e) => {
            tracing::error!(error = %e, "start-up failed");
            ExitCode::from(EXIT_STARTUP)
        }
    }
}

fn start(opts: &DaemonOptions) -> Result<ExitCode, StartError> {
    // Everything privileged, while single-threaded.
    privdrop::ensure_single_threaded()?;
    let (helper, socket) = spawn::start(&opts.helper)?;
    let watch = watch::HostWatch::open(&opts.host_root)?;
    // Credentials may live where the unprivileged uid cannot read.
    let kube_source = kubeconf::preload(opts.kubeconfig.as_deref())?;
    let protections = confine(opts.uid, opts.gid)?;
    tracing::info!(
        uid = opts.uid,
        gid = opts.gid,
        capabilities = "none",
        no_new_privs = true,
        dumpable = false,
        landlock = %protections.landlock,
        seccomp = protections.seccomp,
        "privileges dropped, seccomp filter installed"
    );

    // Threads created from here on inherit the filter and the empty sets.
    // One thread runs the loop: the daemon mostly waits on the API server
    // and the helper. A worker thread would add its stack and a malloc
    // arena, and tokio's multi-thread scheduler alone links libm (its
    // statistics call `pow`): half a MiB of resident library for nothing.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let client = helper_client::connect(socket).await?;
        let kube = kubeconf::client(kube_source).await?;
        let mut config = opts.agent.clone();
        config.landlock = Some(protections.landlock.status());
        let ctx = agent::AgentContext {
            helper: client,
            host_events: watch.into_events()?,
            kube,
            config,
        };
        tokio::select! {
            status = helper.exited() => {
                tracing::error!(?status, "bootc-helper exited; exiting so the pod restarts");
                Ok(ExitCode::from(EXIT_HELPER_DIED))
            }
            result = agent::run(ctx) => {
                match result {
                    Ok(()) => Ok(ExitCode::SUCCESS),
                    Err(e) => {
                        tracing::error!(error = %e, "agent failed");
                        Ok(ExitCode::from(EXIT_AGENT_FAILED))
                    }
                }
            }
        }
    })
}
