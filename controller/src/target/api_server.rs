//! The API server's version, which a target's kubelet is checked against
//! (`rollout::holds::os_guard::kubelet_skew`): asked by discovery (`GET /version`)
//! only when a target declares its kubelet, and kept for [`KEPT_FOR`], so
//! that an upgraded control plane is seen within it.

use std::time::{Duration, Instant};

use rollout::holds::os_guard::KubeVersion;
use tokio::sync::Mutex;

/// How long an answer is kept.
pub const KEPT_FOR: Duration = Duration::from_secs(600);

/// The API server's version, asked when needed.
pub struct ApiServerVersion {
    client: kube::Client,
    kept: Mutex<Option<(Instant, KubeVersion)>>,
}

impl std::fmt::Debug for ApiServerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServerVersion").finish_non_exhaustive()
    }
}

impl ApiServerVersion {
    pub fn new(client: kube::Client) -> Self {
        ApiServerVersion {
            client,
            kept: Mutex::new(None),
        }
    }

    /// The version, from the last answer while it is fresh; an error names
    /// what failed.
    pub async fn get(&self) -> Result<KubeVersion, String> {
        let mut kept = self.kept.lock().await;
        if let Some((at, version)) = *kept
            && at.elapsed() < KEPT_FOR
        {
            return Ok(version);
        }
        let info = self
            .client
            .apiserver_version()
            .await
            .map_err(|e| format!("GET /version: {e}"))?;
        let version = KubeVersion::parse(&info.git_version)
            .or_else(|| KubeVersion::parse(&format!("{}.{}", info.major, info.minor)))
            .ok_or_else(|| {
                format!(
                    "GET /version: {:?} is not a Kubernetes version",
                    info.git_version
                )
            })?;
        *kept = Some((Instant::now(), version));
        Ok(version)
    }
}
