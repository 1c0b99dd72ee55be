//! A target's signatures, checked against the signature policy
//! ([`super::policy`]) before any node is told about it.
//!
//! **Where the signatures are**: cosign's layout, as `cosign sign --key`
//! writes it. For `repository@sha256:<hex>`, the image manifest at the tag
//! `sha256-<hex>.sig` of the same repository; each of its layers of type
//! [`SIMPLE_SIGNING`] is a payload blob ("simple signing" JSON: its
//! `critical.image.docker-manifest-digest` and
//! `critical.identity.docker-reference`), and the layer's annotation
//! [`SIGNATURE_ANNOTATION`] is the base64 of an ECDSA P-256 signature (DER)
//! over that blob's bytes, with SHA-256. The manifest and the payloads are
//! read as the target is (the same locations, registries.conf's mirrors
//! first, with the same CAs and the pull secret's credentials for each),
//! and each payload must hash to its layer's digest.
//!
//! **The rule** ([`check`], pure): the scope's `reject` refuses; each of
//! its `sigstoreSigned` requirements needs one payload that its key
//! verifies, that names the target's digest, and whose identity its
//! `signedIdentity` accepts; `insecureAcceptAnything` alone asks nothing
//! (the registry is not asked). A refusal is `SignatureRefused` naming the
//! scope, the key and why (no signature, not signed by the key, signed for
//! another digest or another repository). Every failure keeps the previous
//! target (fail closed, as the OS guard does). What was verified is kept by
//! (`repository@digest`, the policy's version): a pool planned again every
//! few seconds does not ask again.

use api::image_ref::ImageRef;
use base64::Engine;
use p256::ecdsa::signature::Verifier;
use serde::Deserialize;

use super::client::Session;
use super::mirrors::{self, Plan};
use super::policy::{self, Requirement};
use super::protocol::Endpoint;
use super::{ACCEPTED, PullSecret, RegistryError, Resolved, Resolver, named, sha256_digest};

/// The annotation of a signature layer that holds the signature (base64).
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The media type of a signature layer: a simple signing payload.
pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The payload's `critical.type`.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";
/// The most signature layers read for one target.
const MAX_SIGNATURES: usize = 16;

/// The tag cosign stores the signatures of `digest` at: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> Option<String> {
    let hex = digest.strip_prefix("sha256:")?;
    Some(format!("sha256-{hex}.sig"))
}

/// One signature of the `.sig` manifest: its payload blob's digest and
/// its signature (base64).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureLayer {
    pub digest: String,
    pub signature: String,
}

#[derive(Deserialize)]
struct RawSigManifest {
    #[serde(default)]
    layers: Vec<RawLayer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawLayer {
    #[serde(default)]
    media_type: String,
    digest: String,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

/// The signature layers of a `.sig` manifest (other layers are not
/// signatures and are left alone).
pub fn signature_layers(body: &[u8]) -> Result<Vec<SignatureLayer>, String> {
    let raw: RawSigManifest =
        serde_json::from_slice(body).map_err(|e| format!("not a manifest JSON: {e}"))?;
    Ok(raw
        .layers
        .into_iter()
        .filter(|l| l.media_type == SIMPLE_SIGNING)
        .filter_map(|l| {
            let signature = l.annotations.get(SIGNATURE_ANNOTATION)?.clone();
            Some(SignatureLayer {
                digest: l.digest,
                signature,
            })
        })
        .take(MAX_SIGNATURES)
        .collect())
}

/// A signature read: its payload and its signature (base64).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    pub payload: Vec<u8>,
    pub signature: String,
}

/// Why one signature does not meet a requirement, from the least telling
/// to the most (the most telling of a target's signatures is said).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mismatch {
    /// The key does not verify it (another key signed it, or it is not a
    /// signature).
    NotByKey,
    /// Verified, but its payload is not cosign's simple signing JSON.
    BadPayload(String),
    /// Verified, for another image's digest.
    OtherDigest(String),
    /// Verified, for this digest, with an identity the rule refuses.
    OtherIdentity(String),
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::NotByKey => write!(f, "no signature is verified by the key"),
            Mismatch::BadPayload(why) => write!(f, "the signed payload is not cosign's: {why}"),
            Mismatch::OtherDigest(d) => write!(f, "the key's signature is for another digest, {d}"),
            Mismatch::OtherIdentity(r) => write!(
                f,
                "the key's signature names another identity, {r}, which signedIdentity does not accept"
            ),
        }
    }
}

#[derive(Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    identity: PayloadIdentity,
    image: PayloadImage,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct PayloadIdentity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Deserialize)]
struct PayloadImage {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// Does `signed` meet a `sigstoreSigned` requirement for `image`
/// (`repository@digest`)? The signature first, then what it says.
pub fn check_one(
    key: &p256::ecdsa::VerifyingKey,
    identity: &policy::SignedIdentity,
    image: &ImageRef,
    signed: &Signed,
) -> Result<(), Mismatch> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(signed.signature.trim())
        .map_err(|_| Mismatch::NotByKey)?;
    let signature = p256::ecdsa::Signature::from_der(&raw)
        .or_else(|_| p256::ecdsa::Signature::from_slice(&raw))
        .map_err(|_| Mismatch::NotByKey)?;
    key.verify(&signed.payload, &signature)
        .map_err(|_| Mismatch::NotByKey)?;
    let payload: Payload =
        serde_json::from_slice(&signed.payload).map_err(|e| Mismatch::BadPayload(e.to_string()))?;
    let critical = payload.critical;
    if critical.kind != PAYLOAD_TYPE {
        return Err(Mismatch::BadPayload(format!(
            "critical.type is {:?}, not {PAYLOAD_TYPE:?}",
            critical.kind
        )));
    }
    let digest = critical.image.docker_manifest_digest;
    if image.digest.as_deref() != Some(digest.as_str()) {
        return Err(Mismatch::OtherDigest(digest));
    }
    let reference = critical.identity.docker_reference;
    if !policy::identity_matches(identity, image, &reference) {
        return Err(Mismatch::OtherIdentity(reference));
    }
    Ok(())
}

/// What a scope's requirements ask of a target, before any signature is
/// read.
#[derive(Debug, PartialEq, Eq)]
pub enum Ask {
    /// Accepted as it is (`insecureAcceptAnything` only).
    Nothing,
    /// Refused (`reject`): the message.
    Rejected(String),
    /// Its signatures must be read and [`check`]ed.
    Signatures,
}

/// What `requirements` (the scope `scope`'s) ask of `image`.
pub fn ask(scope: &str, requirements: &[Requirement], image: &ImageRef) -> Ask {
    if requirements.contains(&Requirement::Reject) {
        return Ask::Rejected(format!(
            "{image} is refused by the signature policy: {scope} is reject"
        ));
    }
    if requirements
        .iter()
        .all(|r| *r == Requirement::InsecureAcceptAnything)
    {
        return Ask::Nothing;
    }
    Ask::Signatures
}

/// The rule: every `sigstoreSigned` requirement of the scope met by one of
/// the target's signatures; else the refusal's message, naming the scope,
/// the key and the most telling reason.
pub fn check(
    scope: &str,
    requirements: &[Requirement],
    image: &ImageRef,
    signatures: &[Signed],
) -> Result<(), String> {
    for requirement in requirements {
        let Requirement::SigstoreSigned {
            key,
            key_source,
            identity,
        } = requirement
        else {
            continue;
        };
        let refused = |why: String| {
            format!(
                "{image} is refused by the signature policy: {scope} is sigstoreSigned ({key_source}) and {why}"
            )
        };
        if signatures.is_empty() {
            return Err(refused(format!(
                "the registry has no signature for it (no {} tag with a signature)",
                signature_tag(image.digest.as_deref().unwrap_or_default()).unwrap_or_default()
            )));
        }
        let mut best = None;
        for signed in signatures {
            match check_one(key, identity, image, signed) {
                Ok(()) => {
                    best = None;
                    break;
                }
                Err(why) => best = best.max(Some(why)),
            }
        }
        if let Some(why) = best {
            return Err(refused(why.to_string()));
        }
    }
    Ok(())
}

impl Resolver {
    /// Checks `resolved` (the target) against the signature policy in
    /// force, reading its signatures when the policy asks for them (the
    /// module's rule). Fails closed: `SignatureRefused`, or the registry's
    /// own failure while reading them.
    pub async fn check_signatures(
        &self,
        resolved: &Resolved,
        pull_secret: Option<&PullSecret>,
    ) -> Result<(), RegistryError> {
        let in_force = self
            .policy
            .current()
            .map_err(|p| RegistryError::BadSignaturePolicy(p.to_string()))?;
        let Some(policy) = &in_force.policy else {
            return Ok(());
        };
        let image = ImageRef::parse(&resolved.pinned).map_err(|e| RegistryError::Other {
            reference: resolved.pinned.clone(),
            message: e.to_string(),
        })?;
        let (scope, requirements) = policy.requirements_for(&image);
        let refused = |message| RegistryError::Refused {
            reason: api::Reason::SignatureRefused,
            message,
        };
        match ask(&scope, requirements, &image) {
            Ask::Nothing => return Ok(()),
            Ask::Rejected(message) => return Err(refused(message)),
            Ask::Signatures => {}
        }
        let key = (resolved.pinned.clone(), in_force.version.clone());
        if self.verified.lock().is_ok_and(|v| v.contains(&key)) {
            return Ok(());
        }
        let signatures = self.read_signatures(&image, pull_secret).await?;
        check(&scope, requirements, &image, &signatures).map_err(refused)?;
        tracing::info!(image = %resolved.pinned, %scope, "signatures meet the signature policy");
        if let Ok(mut verified) = self.verified.lock() {
            verified.insert(key);
        }
        Ok(())
    }

    /// The signatures the registry holds for `image` (`repository@digest`),
    /// read from the locations registries.conf gives it, in order: the
    /// first that has them (none when no location has the `.sig` tag).
    async fn read_signatures(
        &self,
        image: &ImageRef,
        pull_secret: Option<&PullSecret>,
    ) -> Result<Vec<Signed>, RegistryError> {
        let conf = self
            .conf
            .current()
            .map_err(|p| RegistryError::BadRegistriesConf(p.to_string()))?;
        let candidates = match mirrors::plan(&conf, image) {
            Err(e) => return Err(RegistryError::BadRegistriesConf(e.to_string())),
            Ok(Plan::Blocked { prefix }) => {
                return Err(RegistryError::Blocked {
                    reference: image.to_string(),
                    prefix,
                });
            }
            Ok(Plan::Ask { candidates, .. }) => candidates,
        };
        let deadline = tokio::time::Instant::now() + self.options.resolution_deadline();
        let mut failure = None;
        for candidate in &candidates {
            let credentials = match pull_secret {
                Some(secret) => secret.credentials(candidate.image.registry())?,
                None => None,
            };
            let asking = self.signatures_at(candidate, credentials.as_ref());
            match tokio::time::timeout_at(deadline, asking).await {
                Ok(Ok(found)) if !found.is_empty() => return Ok(found),
                Ok(Ok(_)) | Ok(Err(RegistryError::NotFound { .. })) => {}
                Ok(Err(e)) => failure = failure.or(Some(e)),
                Err(_) => {
                    failure = failure.or(Some(RegistryError::Unreachable {
                        registry: candidate.image.registry().to_owned(),
                        message: crate::outbound::Failure::TimedOut(
                            self.options.resolution_deadline(),
                        )
                        .to_string(),
                    }));
                    break;
                }
            }
        }
        // No location had signatures: none, unless one could not say.
        failure.map_or(Ok(Vec::new()), Err)
    }

    /// The signatures one location holds: the `.sig` manifest, then each
    /// payload blob, checked against its digest.
    async fn signatures_at(
        &self,
        candidate: &mirrors::Candidate,
        credentials: Option<&super::Credentials>,
    ) -> Result<Vec<Signed>, RegistryError> {
        let at = &candidate.image;
        let registry = at.registry().to_owned();
        let digest = at.digest.as_deref().unwrap_or_default();
        let tag = signature_tag(digest).ok_or_else(|| RegistryError::Other {
            reference: at.to_string(),
            message: "only sha256 digests have signatures here".into(),
        })?;
        let display = format!("{}:{tag}", at.repository());
        let name_it = |e| named(e, &registry, &display);
        let (http, base) = self.location(candidate)?;
        let deadline = self.options.request_deadline();
        let mut session = Session::new(&http, deadline, base, &at.registry_path(), credentials);
        let url = session.url(&format!("manifests/{tag}")).map_err(name_it)?;
        let manifest = session
            .get(url, Endpoint::Manifest, Some(&ACCEPTED.join(", ")))
            .await
            .map_err(name_it)?;
        let layers =
            signature_layers(&manifest.body).map_err(|message| RegistryError::InvalidManifest {
                reference: display.clone(),
                message,
            })?;
        let mut out = Vec::with_capacity(layers.len());
        for layer in layers {
            let url = session
                .url(&format!("blobs/{}", layer.digest))
                .map_err(name_it)?;
            let blob = session
                .get(url, Endpoint::Blob, None)
                .await
                .map_err(name_it)?;
            if sha256_digest(&blob.body) != layer.digest {
                return Err(RegistryError::InvalidManifest {
                    reference: display.clone(),
                    message: format!("a signature payload does not hash to {}", layer.digest),
                });
            }
            out.push(Signed {
                payload: blob.body,
                signature: layer.signature,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::SigningKey;
    use p256::ecdsa::signature::Signer;

    const D: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_slice(&[seed; 32]).unwrap()
    }

    fn payload(reference: &str, digest: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "critical": {
                "identity": {"docker-reference": reference},
                "image": {"docker-manifest-digest": digest},
                "type": PAYLOAD_TYPE,
            },
            "optional": null,
        }))
        .unwrap()
    }

    fn sign(key: &SigningKey, payload: Vec<u8>) -> Signed {
        let signature: p256::ecdsa::Signature = key.sign(&payload);
        Signed {
            signature: base64::engine::general_purpose::STANDARD.encode(signature.to_der()),
            payload,
        }
    }

    fn requires(seed: u8) -> Requirement {
        Requirement::SigstoreSigned {
            key: *key(seed).verifying_key(),
            key_source: "keyPath /keys/os.pub".into(),
            identity: policy::SignedIdentity::MatchRepoDigestOrExact,
        }
    }

    #[test]
    fn the_tag_of_a_digests_signatures() {
        assert_eq!(
            signature_tag(D).unwrap(),
            "sha256-1111111111111111111111111111111111111111111111111111111111111111.sig"
        );
        assert_eq!(signature_tag("sha512:00"), None);
    }

    #[test]
    fn a_signature_manifests_layers() {
        let body = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": OTHER, "size": 1},
            "layers": [
                {"mediaType": SIMPLE_SIGNING, "digest": D, "size": 1, "annotations": {SIGNATURE_ANNOTATION: "c2ln"}},
                {"mediaType": SIMPLE_SIGNING, "digest": OTHER, "size": 1},
                {"mediaType": "application/octet-stream", "digest": OTHER, "size": 1, "annotations": {SIGNATURE_ANNOTATION: "eA=="}},
            ]
        });
        let layers = signature_layers(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert_eq!(
            layers,
            [SignatureLayer {
                digest: D.into(),
                signature: "c2ln".into()
            }]
        );
        assert!(signature_layers(b"[").is_err());
    }

    #[test]
    fn each_way_a_signature_fails_is_told() {
        let image = ImageRef::parse(&format!("q.example.com/os@{D}")).unwrap();
        let scope = "transports.docker[\"q.example.com/os\"]";
        let good = sign(&key(1), payload("q.example.com/os", D));
        let cases: Vec<(&str, Vec<Signed>, Option<&str>)> = vec![
            ("signed by the key", vec![good.clone()], None),
            (
                "one of several",
                vec![sign(&key(2), payload("q.example.com/os", D)), good.clone()],
                None,
            ),
            (
                "unsigned",
                vec![],
                Some("has no signature for it (no sha256-1111"),
            ),
            (
                "another key",
                vec![sign(&key(2), payload("q.example.com/os", D))],
                Some("no signature is verified by the key"),
            ),
            (
                "another digest",
                vec![sign(&key(1), payload("q.example.com/os", OTHER))],
                Some("for another digest, sha256:2222"),
            ),
            (
                "another repository",
                vec![sign(&key(1), payload("q.example.com/evil", D))],
                Some("another identity, q.example.com/evil"),
            ),
            (
                "not cosign's payload",
                vec![sign(&key(1), b"{}".to_vec())],
                Some("not cosign's"),
            ),
            (
                "a payload changed after signing",
                vec![Signed {
                    payload: payload("q.example.com/os", OTHER),
                    signature: good.signature.clone(),
                }],
                Some("no signature is verified by the key"),
            ),
            (
                "the most telling reason",
                vec![
                    sign(&key(2), payload("q.example.com/os", D)),
                    sign(&key(1), payload("q.example.com/os", OTHER)),
                ],
                Some("for another digest"),
            ),
        ];
        for (name, signatures, want) in cases {
            let got = check(scope, &[requires(1)], &image, &signatures);
            match (want, got) {
                (None, Ok(())) => {}
                (Some(want), Err(message)) => {
                    assert!(
                        message.contains(want)
                            && message.contains(scope)
                            && message.contains("keyPath /keys/os.pub"),
                        "{name}: {message}"
                    );
                }
                (want, got) => panic!("{name}: want {want:?}, got {got:?}"),
            }
        }
        // Two keys required: both must sign.
        let both = [requires(1), requires(2)];
        assert!(check(scope, &both, &image, std::slice::from_ref(&good)).is_err());
    }

    #[test]
    fn what_a_scope_asks() {
        let image = ImageRef::parse(&format!("q.example.com/os@{D}")).unwrap();
        let accept = [Requirement::InsecureAcceptAnything];
        assert_eq!(ask("default", &accept, &image), Ask::Nothing);
        assert_eq!(ask("default", &[requires(1)], &image), Ask::Signatures);
        let Ask::Rejected(message) = ask("default", &[requires(1), Requirement::Reject], &image)
        else {
            panic!("reject refuses");
        };
        assert!(message.contains("default is reject"), "{message}");
    }
}
