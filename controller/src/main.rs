//! `bootc-controller`: rolls bootc images across the nodes of each
//! BootcNodePool. Connects with `KUBECONFIG` (or the in-cluster config).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use controller::lease::LeaseConfig;
use controller::{Options, run};
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(
    name = "bootc-controller",
    about = "Rolls bootc OS images across BootcNodePools"
)]
struct Args {
    /// Take part in leader election on a Lease; only the holder acts.
    #[arg(long, env = "BOOTC_LEADER_ELECT")]
    leader_elect: bool,
    /// Name of the Lease.
    #[arg(long, default_value = "bootc-controller", env = "BOOTC_LEASE_NAME")]
    lease_name: String,
    /// Namespace of the Lease, of events, and of pull secrets.
    #[arg(long, default_value = api::labels::OPERATOR_NAMESPACE, env = "BOOTC_NAMESPACE")]
    namespace: String,
    /// This replica's identity (default: $POD_NAME, else the host name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Lease duration in seconds.
    #[arg(long, default_value_t = 15)]
    lease_duration_seconds: u64,
    /// Serve /healthz and /readyz on this address ("" disables).
    #[arg(long, default_value = "0.0.0.0:8081")]
    health_addr: String,
    /// Reconcile every pool at least this often, in seconds.
    #[arg(long, default_value_t = 600)]
    resync_seconds: u64,
}

#[derive(Debug, thiserror::Error)]
enum MainError {
    #[error("invalid --health-addr {0:?}: {1}")]
    HealthAddr(String, std::net::AddrParseError),
    #[error("loading the kubeconfig: {0}")]
    Config(String),
    #[error(transparent)]
    Run(#[from] controller::Error),
    #[error("installing signal handlers: {0}")]
    Signal(std::io::Error),
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match real_main().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "bootc-controller failed");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn real_main() -> Result<(), MainError> {
    let args = Args::parse();
    let identity = args.identity.clone().unwrap_or_else(|| {
        hostname::get()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "bootc-controller".to_owned())
    });
    let health_addr = if args.health_addr.is_empty() {
        None
    } else {
        Some(
            args.health_addr
                .parse::<SocketAddr>()
                .map_err(|e| MainError::HealthAddr(args.health_addr.clone(), e))?,
        )
    };
    let mut options = Options::new(&identity);
    options.namespace = args.namespace.clone();
    options.health_addr = health_addr;
    options.resync = Duration::from_secs(args.resync_seconds.max(1));
    if args.leader_elect {
        let mut cfg = LeaseConfig::new(&args.lease_name, &args.namespace, &identity);
        cfg.duration = Duration::from_secs(args.lease_duration_seconds.max(2));
        cfg.renew_every = cfg.duration / 3;
        options.lease = Some(cfg);
    }
    let config = kube::Config::infer()
        .await
        .map_err(|e| MainError::Config(e.to_string()))?;

    let shutdown = CancellationToken::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(MainError::Signal)?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(MainError::Signal)?;
    let token = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
        token.cancel();
    });
    tracing::info!(
        identity,
        leader_elect = args.leader_elect,
        "bootc-controller starting"
    );
    run(config, options, shutdown).await?;
    Ok(())
}
