//! The four calls. Each validates its input before anything runs, holds the
//! one operation lock for its whole duration, and is bounded by a timeout.
//! [`Engine`] is the gRPC service tonic's generated server dispatches to.

use crate::bootc::{self, RunError, Runner};
use crate::validate::{self, ValidationError};
use crate::{auth, status, updaters};
use proto::*;
use std::future::Future;
use std::time::Duration;
use tokio::sync::Mutex;
use tonic::{Request, Response, Status};

/// Pulling an OS image can take a while on a slow link.
pub const STAGE_LIMIT: Duration = Duration::from_secs(30 * 60);
/// One bootc read (`status`, `switch --help`).
pub const STATUS_LIMIT: Duration = Duration::from_secs(60);
pub const WRITE_AUTH_LIMIT: Duration = Duration::from_secs(10);
/// How long Apply waits for bootc to fail before answering that the
/// reboot is under way, unless `--apply-window-ms` says otherwise.
pub use proto::APPLY_WINDOW;
/// Below the host root: the kernel's id of the current boot.
const BOOT_ID: &str = "proc/sys/kernel/random/boot_id";
/// Slack on top of the inner limits for the whole call (lock wait included).
const SLACK: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("apply: nothing was staged by this helper; call Stage first")]
    NothingStaged,
    /// What this helper staged last, and what the host has staged.
    #[error("apply: the host's staged image is {1:?}, not {0:?} (staged last by this helper)")]
    StagedMismatch(String, Option<String>),
    #[error(transparent)]
    Bootc(#[from] RunError),
    #[error(transparent)]
    Status(#[from] status::ParseError),
    #[error("cannot read the host boot id from {0}")]
    BootId(String),
    #[error(transparent)]
    Auth(#[from] auth::AuthWriteError),
    #[error("{rpc}: did not finish within {limit:?}")]
    Timeout { rpc: &'static str, limit: Duration },
}

impl From<HelperError> for Status {
    fn from(e: HelperError) -> Self {
        use {HelperError as E, RunError as R, auth::AuthWriteError as A};
        let code = match &e {
            E::Invalid(ValidationError::RepositoryNotAllowed { .. }) => Code::PermissionDenied,
            E::Invalid(_) => Code::InvalidArgument,
            E::NothingStaged | E::StagedMismatch(..) => Code::FailedPrecondition,
            E::Bootc(R::Busy(..)) => Code::FailedPrecondition,
            E::Bootc(R::Failed(..)) => Code::Aborted,
            E::Bootc(R::Timeout(..)) | E::Timeout { .. } => Code::DeadlineExceeded,
            E::Auth(A::Symlink(_) | A::WrongType(..)) => Code::PermissionDenied,
            _ => Code::Internal,
        };
        // Escaped: it may quote what bootc or its JSON said.
        let message = api::text::escape_controls(&e.to_string()).into_owned();
        Status::new(code, message)
    }
}

#[derive(Debug, Default)]
struct State {
    /// Whether this bootc has `switch --download-only` (asked once).
    download_only: Option<bool>,
    /// What this helper staged last (locked either way).
    last_staged: Option<String>,
}

/// The helper's logic, independent of the transport.
#[derive(Debug)]
pub struct Engine {
    runner: Runner,
    apply_window: Duration,
    policy: validate::ImagePolicy,
    state: Mutex<State>,
}

impl Engine {
    /// Stage accepts only what `args.policy` allows (and bootc checks the
    /// host's signature policy for every image it fetches, if it says so).
    pub fn new(args: crate::Args) -> Self {
        let host_pid = args.host_pid;
        Engine {
            runner: Runner { host_pid },
            apply_window: args.apply_window,
            policy: args.policy,
            state: Mutex::default(),
        }
    }

    async fn download_only(&self, state: &mut State) -> Result<bool, HelperError> {
        if let Some(v) = state.download_only {
            return Ok(v);
        }
        let help = self.runner.run(&bootc::help_argv(), STATUS_LIMIT).await?;
        let v = bootc::help_supports_download_only(&String::from_utf8_lossy(&help));
        tracing::info!(download_only = v, "how a stage is locked");
        state.download_only = Some(v);
        Ok(v)
    }

    async fn host_status(&self) -> Result<status::Host, HelperError> {
        let json = self.runner.run(&bootc::status_argv(), STATUS_LIMIT).await?;
        Ok(status::parse(&json)?)
    }

    fn boot_id(&self) -> Result<String, HelperError> {
        let path = self.runner.host_root().join(BOOT_ID);
        let err = |why: String| HelperError::BootId(format!("{}: {why}", path.display()));
        let text = std::fs::read_to_string(&path).map_err(|e| err(e.to_string()))?;
        let id = text.trim();
        if id.len() != 36 || !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Err(err(format!("{id:?} is not a UUID")));
        }
        Ok(id.to_owned())
    }

    /// Stages locked: with `switch --download-only` where bootc has it,
    /// else with ostree's finalization lock file around a plain `switch`
    /// (see [`auth`]; a stage over another staged deployment is unlocked
    /// from ostree's removal of the file until it is created again here).
    pub async fn stage(&self, r: &StageRequest) -> Result<StageResponse, HelperError> {
        let image = validate::stage_image(&r.image, &self.policy)?;
        let weights = validate::stage_weights(r.io_weight, r.cpu_weight)?;
        let mut state = self.state.lock().await;
        let download_only = self.download_only(&mut state).await?;
        // Forget the previous image first: a failed stage may have replaced it.
        state.last_staged = None;
        let argv = bootc::stage_argv(&image, download_only, self.policy.enforce_sigpolicy);
        let root = self.runner.host_root();
        let lock = || (!download_only).then(|| auth::lock_finalization(&root, true));
        lock().transpose()?;
        let stage = (bootc::UnitOp::Stage, &weights[..]);
        self.runner.run_in_unit(stage, &argv, STAGE_LIMIT).await?;
        lock().transpose()?;
        state.last_staged = Some(image);
        Ok(StageResponse { locked: true })
    }

    pub async fn apply(&self, soft_reboot: bool) -> Result<ApplyResponse, HelperError> {
        let state = self.state.lock().await;
        let Some(staged) = state.last_staged.clone() else {
            return Err(HelperError::NothingStaged);
        };
        let host = self.host_status().await?;
        let found = status::staged_image(&host).map(str::to_owned);
        if found.as_deref() != Some(staged.as_str()) {
            return Err(HelperError::StagedMismatch(staged, found));
        }
        // ostree would not finalize with its lock file there.
        auth::lock_finalization(&self.runner.host_root(), false)?;
        let argv = bootc::apply_argv(soft_reboot);
        self.runner.apply(&argv, self.apply_window).await?;
        Ok(ApplyResponse {})
    }

    pub async fn status(&self) -> Result<StatusResponse, HelperError> {
        let mut state = self.state.lock().await;
        self.download_only(&mut state).await?;
        let host = self.host_status().await?;
        let mut reply = status::response(&host);
        reply.boot_id = self.boot_id()?;
        // ostree honours its lock file as it does the deployment's own flag.
        let lock_file = auth::finalization_locked(&self.runner.host_root());
        if let Some(staged) = reply.staged.as_mut() {
            staged.download_only |= lock_file;
        }
        reply.download_only_supported = true;
        reply.host_updaters = updaters::read(&self.runner).await?;
        Ok(reply)
    }

    pub async fn write_auth(&self, json: &[u8]) -> Result<WriteAuthResponse, HelperError> {
        let content = validate::auth_payload(json)?;
        let _state = self.state.lock().await;
        let path = auth::write(&self.runner.host_root(), &content)?;
        tracing::info!(path = %path.display(), "wrote registry credentials");
        Ok(WriteAuthResponse {})
    }
}

type Rpc<T> = Result<Response<T>, Status>;
/// What a call comes to, before it is a gRPC answer.
type Out<T> = Result<T, HelperError>;

/// Runs one call under its time limit; a refusal or failure is logged.
async fn timed<T>(rpc: &'static str, limit: Duration, f: impl Future<Output = Out<T>>) -> Rpc<T> {
    let timed = tokio::time::timeout(limit, f).await;
    let result = timed.unwrap_or(Err(HelperError::Timeout { rpc, limit }));
    result.map(Response::new).map_err(|e| {
        tracing::warn!(rpc, error = %e, "refused or failed");
        e.into()
    })
}

/// The four calls as tonic's generated server calls them. A path that is
/// none of them never gets here: the generated server answers UNIMPLEMENTED.
#[tonic::async_trait]
impl proto::helper_server::Helper for Engine {
    async fn stage(&self, r: Request<StageRequest>) -> Rpc<StageResponse> {
        let limit = STAGE_LIMIT + STATUS_LIMIT + SLACK;
        timed("stage", limit, Engine::stage(self, r.get_ref())).await
    }

    async fn apply(&self, r: Request<ApplyRequest>) -> Rpc<ApplyResponse> {
        let limit = STATUS_LIMIT + self.apply_window + SLACK;
        timed("apply", limit, Engine::apply(self, r.get_ref().soft_reboot)).await
    }

    async fn status(&self, _: Request<StatusRequest>) -> Rpc<StatusResponse> {
        let limit = STATUS_LIMIT * 3 + SLACK;
        timed("status", limit, Engine::status(self)).await
    }

    async fn write_auth(&self, r: Request<WriteAuthRequest>) -> Rpc<WriteAuthResponse> {
        let call = Engine::write_auth(self, &r.get_ref().docker_config_json);
        timed("write_auth", WRITE_AUTH_LIMIT, call).await
    }
}
