//! The command line of `bootc-controller` (`src/main.rs`): its flags, its
//! logging, and the [`Options`] they make. One shipped binary; the tests'
//! `bootc-controller-test` (`src/bin/test_controller.rs`, built only with
//! the `test-support` feature) is the same program with one resolver put
//! in its place ([`main`]'s `resolver`): no flag of the shipped binary
//! turns a check off.

use std::net::SocketAddr;
use std::time::Duration;

use crate::runtime::lease::LeaseConfig;
use crate::{Options, run};
use clap::Parser;
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(
    name = "bootc-controller",
    version,
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
    #[arg(long, default_value_t = crate::runtime::lease::DEFAULT_LEASE_DURATION.as_secs())]
    lease_duration_seconds: u64,
    /// Serve /healthz and /readyz on this address ("" disables).
    #[arg(long, default_value = "0.0.0.0:8081")]
    health_addr: String,
    /// Serve Prometheus metrics (/metrics, OpenMetrics text) on this address
    /// over HTTPS, only to bearer tokens whose user may get /metrics
    /// (TokenReview, SubjectAccessReview); "" disables. Not the health
    /// address.
    #[arg(long, default_value = "0.0.0.0:8080", env = "BOOTC_METRICS_ADDR")]
    metrics_addr: String,
    /// A directory with the metrics server's certificate, tls.crt and
    /// tls.key (a kubernetes.io/tls Secret mounted there); absent or empty: a
    /// self-signed one made at start.
    #[arg(long, env = "BOOTC_METRICS_CERT_DIR")]
    metrics_cert_dir: Option<std::path::PathBuf>,
    /// Log lines as text or as JSON objects (one per line).
    #[arg(long, value_enum, default_value = "text", env = "BOOTC_LOG_FORMAT")]
    log_format: LogFormat,
    /// Reconcile every pool at least this often, in seconds.
    #[arg(long, default_value_t = crate::runtime::DEFAULT_RESYNC.as_secs())]
    resync_seconds: u64,
    /// /healthz fails while a reconcile has been running this long, in
    /// seconds (a wedged loop: the kubelet restarts the controller).
    #[arg(long, default_value_t = crate::runtime::liveness::WEDGED_AFTER.as_secs())]
    wedged_after_seconds: u64,
    /// Multiply every stuck deadline (the table in the `stuck` module docs)
    /// by this; 1 keeps the defaults.
    #[arg(long, default_value_t = rollout::reboot::stuck::Deadlines::DEFAULT_SCALE)]
    stuck_deadline_scale: f64,
    /// The shortest rest between two plans of a pool, per member, in
    /// microseconds (the controller's pacing): 150 rests a pool of 20,000
    /// nodes 3 s between plans. More spends less CPU on a large pool's
    /// plans and lets its new slots wait longer; a node back on the target
    /// gives its slot back between plans all the same.
    #[arg(long, default_value_t = crate::runtime::pace::Pace::default().per_member.as_micros() as u64)]
    rest_per_member_micros: u64,
    /// Set Kubernetes' Node lifecycle conditions (MaintenanceInProgress,
    /// DrainInProgress, Drained; KEP-5683) on nodes in reboot slots. Needs
    /// the grant on nodes/status in deploy/optional/node-lifecycle-conditions.
    #[arg(long, env = "BOOTC_NODE_LIFECYCLE_CONDITIONS")]
    node_lifecycle_conditions: bool,
    /// Resolve tag references against their registry this often, in seconds.
    #[arg(long, default_value_t = crate::target::tag_policy::DEFAULT_RESOLVE_INTERVAL.as_secs())]
    tag_resolution_interval_seconds: u64,
    /// Extra CA certificates (PEM) to trust for registries.
    #[arg(long, env = "BOOTC_REGISTRY_CA_FILE")]
    registry_ca_file: Option<std::path::PathBuf>,
    /// A directory of PEM files whose CA certificates to trust for
    /// registries, as well; absent or empty adds none (deploy/ mounts the
    /// optional ConfigMap `bootc-registry-ca` here). Read again before
    /// every resolution: a change needs no restart.
    #[arg(long, env = "BOOTC_REGISTRY_CA_DIR")]
    registry_ca_dir: Option<std::path::PathBuf>,
    /// A registries.conf (containers-registries.conf(5), version 2: the
    /// text the hosts have in /etc/containers/registries.conf): its
    /// mirrors are asked in order before an image's registry, and its
    /// blocked registries are refused. Absent or empty: none (deploy/
    /// mounts the ConfigMap `bootc-registries` here). Read again before
    /// every resolution: a change needs no restart.
    #[arg(long, env = "BOOTC_REGISTRIES_CONF")]
    registries_conf: Option<std::path::PathBuf>,
    /// A signature policy (containers-policy.json(5): the text the hosts
    /// have in /etc/containers/policy.json): a new target's cosign
    /// signatures are checked against it before any node is told (its
    /// `docker` scopes' insecureAcceptAnything, reject and sigstoreSigned
    /// with keyPath or keyData). Absent or empty: none (deploy/ mounts the
    /// ConfigMap `bootc-signature-policy` here, with its key files). Read
    /// again before every check: a change needs no restart.
    #[arg(long, env = "BOOTC_SIGNATURE_POLICY")]
    signature_policy: Option<std::path::PathBuf>,
    /// How long one registry request may take, in seconds, from its
    /// connection to the last byte of its answer; a whole resolution may
    /// take twice this. Keep it below half of --wedged-after-seconds.
    #[arg(long, default_value_t = crate::target::registry::REQUEST_DEADLINE.as_secs())]
    registry_timeout_seconds: u64,
    /// A Prometheus endpoint that pools' alert gates may ask, as NAME=URL
    /// (an http or https URL with a host and no user, query or fragment,
    /// such as main=http://prometheus-k8s.monitoring.svc:9090); a pool
    /// names it in spec.rollout.alertGate.endpoint. Repeat for several.
    /// Without any, alert gates hold their pools' rollouts and say why.
    #[arg(long = "alert-gate-endpoint")]
    alert_gate_endpoints: Vec<String>,
    /// An Alertmanager that pools' silences may use, as NAME=URL (an http
    /// or https URL with a host and no user, query or fragment, such as
    /// main=http://alertmanager-main.monitoring.svc:9093); a pool names it
    /// in spec.rollout.silences.endpoint. Repeat for several. Without any,
    /// pools with silences hold their new slots and say why.
    #[arg(long = "alertmanager-endpoint")]
    alertmanager_endpoints: Vec<String>,
    /// A registry (host[:port]) that may be reached over plain HTTP. Repeat
    /// for several. Without it every registry must speak HTTPS.
    #[arg(long = "insecure-registry")]
    insecure_registries: Vec<String>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, thiserror::Error)]
enum MainError {
    #[error("invalid --{0} {1:?}: {2}")]
    Addr(&'static str, String, std::net::AddrParseError),
    #[error("loading the kubeconfig: {0}")]
    Config(String),
    #[error(transparent)]
    Run(#[from] crate::Error),
    #[error("reading the registry CA {0}: {1}")]
    RegistryCa(String, std::io::Error),
    #[error("invalid --stuck-deadline-scale: {0}")]
    StuckScale(#[from] rollout::reboot::stuck::BadScale),
    #[error(
        "--health-addr and --metrics-addr are both {0}: /metrics needs a port of its own (HTTPS)"
    )]
    SameAddr(SocketAddr),
    #[error(transparent)]
    Endpoint(#[from] crate::outbound::EndpointError),
    #[error("installing signal handlers: {0}")]
    Signal(std::io::Error),
}

/// Logs to stderr, as text or JSON; every line carries the fields of the
/// spans it is in (the pool being reconciled, the node being drained).
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only for a person at a terminal, not in a pod's or a file's log.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .init(),
    }
}

/// Runs the controller. One thread: the controller's work is planning (pure CPU, paced to a
/// tenth of its time, see `pace`) and waiting on the API server. In the
/// 5,000-node benchmark a second worker thread bought no speed (CPU per
/// second of rollout 0.147 with it, 0.144 without) and cost memory (peak
/// RSS 86.7 MiB with it, 71.9 MiB without: one malloc arena, not two).
///
/// `args`: the command line; `resolver`: what resolves images in place of
/// the registries (the tests' binary only).
pub fn main(
    args: impl IntoIterator<Item = std::ffi::OsString>,
    resolver: Option<std::sync::Arc<dyn crate::target::Resolve>>,
) -> std::process::ExitCode {
    let args = Args::parse_from(args);
    init_logging(args.log_format);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "bootc-controller cannot start its runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(real_main(args, resolver)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "bootc-controller failed");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The extra registry CAs of `--registry-ca-file`, read once (None: none);
/// `--registry-ca-dir` is read while the controller runs
/// (`crate::target::registry::trust`).
fn registry_ca_file(args: &Args) -> Result<Option<Vec<u8>>, MainError> {
    let Some(path) = &args.registry_ca_file else {
        return Ok(None);
    };
    std::fs::read(path)
        .map(Some)
        .map_err(|e| MainError::RegistryCa(path.display().to_string(), e))
}

/// `addr`, or None for "".
fn parse_addr(flag: &'static str, addr: &str) -> Result<Option<SocketAddr>, MainError> {
    if addr.is_empty() {
        return Ok(None);
    }
    addr.parse::<SocketAddr>()
        .map(Some)
        .map_err(|e| MainError::Addr(flag, addr.to_owned(), e))
}

/// The registry-backed resolver.
fn resolver(
    args: &Args,
    config: &kube::Config,
) -> Result<std::sync::Arc<dyn crate::target::Resolve>, MainError> {
    let client =
        kube::Client::try_from(config.clone()).map_err(|e| MainError::Config(e.to_string()))?;
    let registry =
        crate::target::registry::Resolver::new(crate::target::registry::RegistryOptions {
            plain_http: args.insecure_registries.clone(),
            ca_bundle: registry_ca_file(args)?,
            ca_dir: args.registry_ca_dir.clone(),
            timeout: Some(Duration::from_secs(args.registry_timeout_seconds.max(1))),
            registries_conf: args.registries_conf.clone(),
            signature_policy: args.signature_policy.clone(),
        });
    Ok(std::sync::Arc::new(
        crate::target::resolver::RegistryResolver::new(
            registry,
            Duration::from_secs(args.tag_resolution_interval_seconds.max(1)),
            crate::target::api_server::ApiServerVersion::new(client),
        ),
    ))
}

async fn real_main(
    args: Args,
    resolver_override: Option<std::sync::Arc<dyn crate::target::Resolve>>,
) -> Result<(), MainError> {
    let identity = args.identity.clone().unwrap_or_else(|| {
        hostname::get()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "bootc-controller".to_owned())
    });
    let health_addr = parse_addr("health-addr", &args.health_addr)?;
    let metrics_addr = parse_addr("metrics-addr", &args.metrics_addr)?;
    if let Some(addr) = health_addr.filter(|h| Some(*h) == metrics_addr) {
        return Err(MainError::SameAddr(addr));
    }
    let mut options = Options::new(&identity);
    options.namespace = args.namespace.clone();
    options.health_addr = health_addr;
    options.metrics_addr = metrics_addr;
    options.metrics_cert_dir = args.metrics_cert_dir.clone();
    options.resync = Duration::from_secs(args.resync_seconds.max(1));
    options.wedged_after = Duration::from_secs(args.wedged_after_seconds.max(1));
    options.deadlines = rollout::reboot::stuck::Deadlines::scaled(args.stuck_deadline_scale)?;
    options.node_lifecycle_conditions = args.node_lifecycle_conditions;
    options.pace.per_member = Duration::from_micros(args.rest_per_member_micros);
    options.alert_endpoints = crate::gates::alerts::AlertEndpoints::parse(
        args.alert_gate_endpoints.iter().map(String::as_str),
    )?;
    options.alertmanager_endpoints = crate::actions::silences::AlertmanagerEndpoints::parse(
        args.alertmanager_endpoints.iter().map(String::as_str),
    )?;
    if args.leader_elect {
        let mut cfg = LeaseConfig::new(&args.lease_name, &args.namespace, &identity);
        cfg.duration = Duration::from_secs(args.lease_duration_seconds.max(2));
        cfg.renew_every = cfg.duration / 3;
        options.lease = Some(cfg);
    }
    let config = kube::Config::infer()
        .await
        .map_err(|e| MainError::Config(e.to_string()))?;
    options.resolver = match resolver_override {
        Some(resolver) => resolver,
        None => resolver(&args, &config)?,
    };

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
