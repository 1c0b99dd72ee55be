//! Parsing `bootc status --format=json --format-version=1` into the typed,
//! allow-listed fields of the helper protocol. Unknown fields are ignored
//! (bootc adds fields over time); `signature` (a string or an object) and
//! every other field not listed here is never read.

use serde::Deserialize;

/// The parts of bootc's `Host` the helper reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Host {
    pub status: Option<HostStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HostStatus {
    pub staged: Option<BootEntry>,
    pub booted: Option<BootEntry>,
    pub rollback: Option<BootEntry>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BootEntry {
    pub image: Option<ImageStatus>,
    pub incompatible: bool,
    pub soft_reboot_capable: bool,
    pub download_only: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImageStatus {
    pub image: ImageReference,
    pub version: Option<String>,
    pub timestamp: Option<String>,
    /// Empty when bootc gives none: the daemon then has no digest for it.
    pub image_digest: String,
    pub architecture: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ImageReference {
    pub image: String,
}

/// Bootc printed something that is not its status JSON.
#[derive(Debug, thiserror::Error)]
#[error("bootc status output is not a bootc Host: {0}")]
pub struct ParseError(#[from] serde_json::Error);

/// Parses bootc's JSON output.
pub fn parse(json: &[u8]) -> Result<Host, ParseError> {
    Ok(serde_json::from_slice(json)?)
}

/// Strings from bootc are copied into the reply only up to this length, so
/// that a confused bootc cannot make the reply large.
const FIELD_MAX: usize = 1024;

fn clip(s: &str) -> String {
    let max = FIELD_MAX.min(s.len());
    let end = (0..=max).rev().find(|i| s.is_char_boundary(*i));
    s[..end.unwrap_or(0)].to_owned()
}

/// Maps one deployment to the protocol. A deployment without an image
/// (e.g. a plain ostree commit) is reported with an empty image and digest,
/// so the daemon can tell "something is staged" from "nothing is staged".
pub fn to_proto(entry: &BootEntry) -> proto::BootEntry {
    let i = entry.image.clone().unwrap_or_default();
    proto::BootEntry {
        image: clip(&i.image.image),
        digest: clip(&i.image_digest),
        version: i.version.as_deref().map(clip),
        timestamp: i.timestamp.as_deref().map(clip),
        architecture: clip(&i.architecture),
        soft_reboot_capable: entry.soft_reboot_capable,
        incompatible: entry.incompatible,
        download_only: entry.download_only,
    }
}

/// The protocol reply for a parsed host (boot id and download-only support
/// are filled in by the caller).
pub fn response(host: &Host) -> proto::StatusResponse {
    let status = host.status.clone().unwrap_or_default();
    proto::StatusResponse {
        booted: status.booted.as_ref().map(to_proto),
        staged: status.staged.as_ref().map(to_proto),
        rollback: status.rollback.as_ref().map(to_proto),
        ..Default::default()
    }
}

/// The image of the staged deployment, if any.
pub fn staged_image(host: &Host) -> Option<&str> {
    let staged = host.status.as_ref()?.staged.as_ref()?;
    staged.image.as_ref().map(|i| i.image.image.as_str())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_download_only_staged() {
        let json = br#"{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","status":{
          "staged":{"image":{"image":{"image":"q.io/a@sha256:1","transport":"registry","signature":{"ostreeRemote":"x"}},
             "imageDigest":"sha256:1","architecture":"amd64","version":null},"incompatible":false,"pinned":false,
             "downloadOnly":true,"softRebootCapable":true,"somethingNew":{"a":1}},
          "booted":null}}"#;
        let host = parse(json).unwrap();
        let r = response(&host);
        let staged = r.staged.unwrap();
        assert!(staged.download_only && staged.soft_reboot_capable);
        assert_eq!(staged.digest, "sha256:1");
        assert_eq!(staged.version, None);
        assert!(r.booted.is_none());
        assert_eq!(staged_image(&host), Some("q.io/a@sha256:1"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse(b"error: not a bootc system").is_err());
        assert!(parse(br#"{"status":{"booted":{"image":{"imageDigest":5}}}}"#).is_err());
    }

    #[test]
    fn clips_long_fields() {
        let long = "é".repeat(FIELD_MAX);
        assert!(clip(&long).len() <= FIELD_MAX);
    }
}
