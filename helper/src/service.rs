//! The four RPCs. Each validates its input before anything runs, holds the
//! one operation lock for its whole duration, and is bounded by a timeout.

use crate::bootc::{self, ApplyOutcome, RunError, Runner};
use crate::validate::{self, ValidationError};
use crate::{auth, status};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;
use tonic::{Request, Response};

/// Time limits of one call. The defaults suit a real host; tests shorten
/// `apply_window`.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Pulling an OS image can take a while on a slow link.
    pub stage: Duration,
    pub status: Duration,
    pub write_auth: Duration,
    /// How long Apply waits for bootc to fail before answering that the
    /// reboot is under way.
    pub apply_window: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            stage: Duration::from_secs(30 * 60),
            status: Duration::from_secs(60),
            write_auth: Duration::from_secs(10),
            apply_window: Duration::from_secs(5),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("apply: nothing was staged by this helper; call Stage first")]
    NothingStaged,
    #[error(
        "apply: the host's staged image is {found:?}, not {expected:?} (staged last by this helper)"
    )]
    StagedMismatch {
        expected: String,
        found: Option<String>,
    },
    #[error(transparent)]
    Bootc(#[from] RunError),
    #[error(transparent)]
    Status(#[from] status::ParseError),
    #[error("cannot read the host boot id from {path}: {reason}")]
    BootId { path: String, reason: String },
    #[error(transparent)]
    Auth(#[from] auth::AuthWriteError),
    #[error("{rpc}: did not finish within {limit:?}")]
    Timeout { rpc: &'static str, limit: Duration },
}

impl From<HelperError> for tonic::Status {
    fn from(e: HelperError) -> Self {
        use tonic::Code;
        let code = match &e {
            HelperError::Invalid(ValidationError::RepositoryNotAllowed { .. }) => {
                Code::PermissionDenied
            }
            HelperError::Invalid(_) => Code::InvalidArgument,
            HelperError::NothingStaged
            | HelperError::StagedMismatch { .. }
            | HelperError::Bootc(RunError::Busy { .. }) => Code::FailedPrecondition,
            HelperError::Bootc(RunError::Failed { .. }) => Code::Aborted,
            HelperError::Bootc(RunError::Timeout { .. }) | HelperError::Timeout { .. } => {
                Code::DeadlineExceeded
            }
            HelperError::Auth(auth::AuthWriteError::Symlink(_))
            | HelperError::Auth(auth::AuthWriteError::WrongType { .. }) => Code::PermissionDenied,
            _ => Code::Internal,
        };
        tonic::Status::new(code, e.to_string())
    }
}

#[derive(Debug, Clone)]
struct Staged {
    image: String,
    locked: bool,
}

#[derive(Debug, Default)]
struct State {
    download_only: Option<bool>,
    last_staged: Option<Staged>,
}

/// The helper's logic, independent of the transport.
#[derive(Debug)]
pub struct Engine {
    runner: Runner,
    limits: Limits,
    policy: validate::ImagePolicy,
    state: Mutex<State>,
}

impl Engine {
    /// Stage accepts only what `policy` allows (and bootc checks the host's
    /// signature policy for every image it fetches, if it says so).
    pub fn new(runner: Runner, limits: Limits, policy: validate::ImagePolicy) -> Self {
        let state = Mutex::new(State::default());
        Engine {
            runner,
            limits,
            policy,
            state,
        }
    }

    async fn download_only(&self, state: &mut State) -> Result<bool, HelperError> {
        if let Some(v) = state.download_only {
            return Ok(v);
        }
        let out = self
            .runner
            .run(&bootc::help_argv(), self.limits.status)
            .await?;
        let v = bootc::help_supports_download_only(&String::from_utf8_lossy(&out.stdout));
        if !v {
            tracing::warn!("bootc has no switch --download-only: staging will be unlocked");
        }
        state.download_only = Some(v);
        Ok(v)
    }

    async fn host_status(&self) -> Result<status::Host, HelperError> {
        let out = self
            .runner
            .run(&bootc::status_argv(), self.limits.status)
            .await?;
        Ok(status::parse(&out.stdout)?)
    }

    fn boot_id(&self) -> Result<String, HelperError> {
        let path = self
            .runner
            .host_root()
            .join("proc/sys/kernel/random/boot_id");
        let err = |reason: String| HelperError::BootId {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| err(e.to_string()))?;
        let id = text.trim();
        if id.len() != 36 || !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Err(err(format!("{id:?} is not a UUID")));
        }
        Ok(id.to_owned())
    }

    pub async fn stage(&self, image: &str) -> Result<proto::StageResponse, HelperError> {
        let image = validate::stage_image(image, &self.policy)?;
        let mut state = self.state.lock().await;
        let locked = self.download_only(&mut state).await?;
        // Forget the previous image first: a failed stage may have replaced it.
        state.last_staged = None;
        let argv = sigpolicy(
            bootc::stage_argv(&image, locked),
            self.policy.enforce_sigpolicy,
        );
        self.runner
            .run_in_unit(bootc::UnitOp::Stage, &argv, self.limits.stage)
            .await?;
        state.last_staged = Some(Staged { image, locked });
        Ok(proto::StageResponse { locked })
    }

    pub async fn apply(&self, soft_reboot: bool) -> Result<proto::ApplyResponse, HelperError> {
        let state = self.state.lock().await;
        let staged = state
            .last_staged
            .clone()
            .ok_or(HelperError::NothingStaged)?;
        let host = self.host_status().await?;
        let found = status::staged_image(&host);
        if found != Some(staged.image.as_str()) {
            return Err(HelperError::StagedMismatch {
                expected: staged.image,
                found: found.map(str::to_owned),
            });
        }
        let argv = sigpolicy(
            bootc::apply_argv(&staged.image, staged.locked, soft_reboot),
            self.policy.enforce_sigpolicy,
        );
        match self.runner.apply(&argv, self.limits.apply_window).await? {
            ApplyOutcome::Exited => tracing::info!("bootc apply exited 0"),
            ApplyOutcome::StillRunning => {
                tracing::info!("bootc apply still running: reboot under way")
            }
        }
        Ok(proto::ApplyResponse {})
    }

    pub async fn status(&self) -> Result<proto::StatusResponse, HelperError> {
        let mut state = self.state.lock().await;
        let download_only_supported = self.download_only(&mut state).await?;
        let host = self.host_status().await?;
        let mut reply = status::response(&host);
        reply.boot_id = self.boot_id()?;
        reply.download_only_supported = download_only_supported;
        Ok(reply)
    }

    pub async fn write_auth(
        &self,
        payload: &[u8],
    ) -> Result<proto::WriteAuthResponse, HelperError> {
        let content = validate::auth_payload(payload)?;
        let _state = self.state.lock().await;
        let path = auth::write(&self.runner.host_root(), &content)?;
        tracing::info!(path = %path.display(), "wrote registry credentials");
        Ok(proto::WriteAuthResponse {})
    }
}

/// Adds `--enforce-container-sigpolicy` to a `switch` that names an image
/// (right before `--`), when asked. `--from-downloaded` fetches nothing, so
/// it gets none.
pub fn sigpolicy(mut argv: Vec<String>, enforce: bool) -> Vec<String> {
    if let Some(i) = argv.iter().position(|a| a == "--").filter(|_| enforce) {
        argv.insert(i, "--enforce-container-sigpolicy".to_owned());
    }
    argv
}

/// The tonic service over an [`Engine`].
#[derive(Debug, Clone)]
pub struct HelperService(pub Arc<Engine>);

async fn bounded<T>(
    rpc: &'static str,
    limit: Duration,
    fut: impl std::future::Future<Output = Result<T, HelperError>>,
) -> Result<Response<T>, tonic::Status> {
    let result = match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(HelperError::Timeout { rpc, limit }),
    };
    match result {
        Ok(v) => Ok(Response::new(v)),
        Err(e) => {
            tracing::warn!(rpc, error = %e, "refused or failed");
            Err(e.into())
        }
    }
}

/// Slack on top of the inner limits for the whole call (lock wait included).
const SLACK: Duration = Duration::from_secs(30);

#[tonic::async_trait]
impl proto::helper_server::Helper for HelperService {
    async fn stage(
        &self,
        request: Request<proto::StageRequest>,
    ) -> Result<Response<proto::StageResponse>, tonic::Status> {
        let limit = self.0.limits.stage + self.0.limits.status + SLACK;
        bounded("stage", limit, self.0.stage(&request.get_ref().image)).await
    }

    async fn apply(
        &self,
        request: Request<proto::ApplyRequest>,
    ) -> Result<Response<proto::ApplyResponse>, tonic::Status> {
        let limit = self.0.limits.status + self.0.limits.apply_window + SLACK;
        bounded("apply", limit, self.0.apply(request.get_ref().soft_reboot)).await
    }

    async fn status(
        &self,
        _request: Request<proto::StatusRequest>,
    ) -> Result<Response<proto::StatusResponse>, tonic::Status> {
        let limit = self.0.limits.status * 2 + SLACK;
        bounded("status", limit, self.0.status()).await
    }

    async fn write_auth(
        &self,
        request: Request<proto::WriteAuthRequest>,
    ) -> Result<Response<proto::WriteAuthResponse>, tonic::Status> {
        let limit = self.0.limits.write_auth;
        bounded(
            "write_auth",
            limit,
            self.0.write_auth(&request.get_ref().docker_config_json),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigpolicy_goes_before_the_image_only() {
        let img = "quay.io/a@sha256:00";
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            sigpolicy(bootc::stage_argv(img, true), true),
            v(&[
                "switch",
                "--download-only",
                "--enforce-container-sigpolicy",
                "--",
                img
            ])
        );
        assert_eq!(
            sigpolicy(bootc::apply_argv(img, false, false), true),
            v(&[
                "switch",
                "--apply",
                "--enforce-container-sigpolicy",
                "--",
                img
            ])
        );
        assert_eq!(
            sigpolicy(bootc::apply_argv(img, true, true), true),
            bootc::apply_argv(img, true, true)
        );
        assert_eq!(
            sigpolicy(bootc::stage_argv(img, true), false),
            bootc::stage_argv(img, true)
        );
    }
}
