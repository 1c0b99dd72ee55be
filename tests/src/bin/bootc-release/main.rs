//! `./dev release`'s own tool (never shipped: it lives in the tests crate,
//! which no image carries), run by `tests/scripts/assemble-release.sh`.
//!
//! `bootc-release sign` signs a release with a key the releaser holds (a
//! PKCS#8 or SEC1 PEM ECDSA P-256 private key), in cosign's formats, so
//! that `cosign verify --key cosign.pub` and `cosign verify-blob` accept
//! the signatures:
//! - the image: a cosign signature manifest for its digest, in the
//!   release's OCI layout under the tag `sha256-<hex>.sig` (pushing that
//!   tag beside the image puts it where `cosign sign --key` would). Its
//!   layout is the one the controller verifies
//!   (`controller::target::registry::signatures`, whose names it uses);
//! - each file given (`SHA256SUMS`, the chart): `FILE.sig`, as
//!   `cosign sign-blob --key` writes it (base64 of the DER ECDSA signature
//!   over the file, with SHA-256);
//! - the public key, `cosign.pub` (PEM, as `cosign generate-key-pair`
//!   writes it).
//!
//! `bootc-release sbom` writes the image's SBOM (SPDX 2.3 JSON): each
//! crate the shipped binaries' packages depend on (`cargo tree -e normal`
//! of each package on its own, as each is built; versions, sources and
//! checksums from `Cargo.lock`), and each library the image carries
//! (`tests/scripts/image-libraries.sh`, build-image.sh's list) with the
//! Debian package it came from (`dpkg -S`) and its version (`dpkg-query`).
//!
//! `bootc-release provenance` writes the release's provenance: an in-toto
//! Statement with an SLSA v1 provenance predicate (the image's digest and
//! each file's as subjects, the commit, the command, the builder).
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use base64::Engine;
use clap::Parser;
use controller::target::registry::{sha256_digest, signatures};
use p256::ecdsa::SigningKey;
use p256::ecdsa::signature::Signer;
use p256::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use serde_json::{Value, json};

mod provenance;
mod sbom;

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const REF_NAME: &str = "org.opencontainers.image.ref.name";

#[derive(Parser)]
#[command(about = "./dev release's tool: signs a release")]
enum Cli {
    /// Signs the image in an OCI layout and each FILE; writes the public key.
    Sign {
        /// The private key: PEM, ECDSA P-256 (PKCS#8 or SEC1).
        #[arg(long)]
        key: PathBuf,
        /// The release's OCI layout.
        #[arg(long)]
        layout: PathBuf,
        /// The image's manifest digest (sha256:...).
        #[arg(long)]
        digest: String,
        /// Where the image is pushed (registry/path): the signed identity.
        #[arg(long)]
        repository: String,
        /// Where to write the public key (PEM).
        #[arg(long)]
        public_key: PathBuf,
        /// Files to sign, each into FILE.sig.
        files: Vec<PathBuf>,
    },
    /// Writes the image's SBOM (SPDX 2.3 JSON) on stdout.
    Sbom {
        /// The directory of the image's binaries (bootc-controller,
        /// bootc-daemon, bootc-helper).
        #[arg(long)]
        bin_dir: PathBuf,
        /// The image's manifest digest (sha256:...).
        #[arg(long)]
        digest: String,
        /// Where the image is pushed (registry/path).
        #[arg(long)]
        repository: String,
        /// The document's creation time (RFC 3339; the commit's, for the
        /// same bytes from the same commit).
        #[arg(long)]
        created: String,
    },
    /// Writes the release's provenance (in-toto Statement, SLSA v1) on stdout.
    Provenance {
        /// The image's manifest digest (sha256:...).
        #[arg(long)]
        digest: String,
        /// Where the image is pushed (registry/path).
        #[arg(long)]
        repository: String,
        /// The command that built the release.
        #[arg(long)]
        command: String,
        /// The builder's id (a URI).
        #[arg(long)]
        builder: String,
        /// When the build started (RFC 3339).
        #[arg(long)]
        started: String,
        /// When it finished (RFC 3339).
        #[arg(long)]
        finished: String,
        /// The release's files, each a subject.
        files: Vec<PathBuf>,
    },
}

fn main() -> Result<()> {
    match Cli::parse() {
        Cli::Sign {
            key,
            layout,
            digest,
            repository,
            public_key,
            files,
        } => {
            let key = read_key(&key)?;
            let pem = key
                .verifying_key()
                .to_public_key_pem(LineEnding::LF)
                .context("encoding the public key")?;
            write(&public_key, pem.as_bytes())?;
            sign_image(&key, &layout, &digest, &repository)?;
            for file in &files {
                sign_file(&key, file)?;
            }
            Ok(())
        }
        Cli::Sbom {
            bin_dir,
            digest,
            repository,
            created,
        } => {
            let sbom = sbom::document(&bin_dir, &digest, &repository, &created)?;
            print_json(&sbom)
        }
        Cli::Provenance {
            digest,
            repository,
            command,
            builder,
            started,
            finished,
            files,
        } => {
            let times = (started.as_str(), finished.as_str());
            let statement =
                provenance::statement(&digest, &repository, &command, &builder, times, &files)?;
            print_json(&statement)
        }
    }
}

fn print_json(value: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::io::Write::write_all(&mut std::io::stdout(), format!("{text}\n").as_bytes())
        .context("writing stdout")
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

fn read_key(path: &Path) -> Result<SigningKey> {
    let pem = std::fs::read_to_string(path)
        .with_context(|| format!("reading the signing key {}", path.display()))?;
    SigningKey::from_pkcs8_pem(&pem)
        .ok()
        .or_else(|| p256::SecretKey::from_sec1_pem(&pem).ok().map(Into::into))
        .with_context(|| {
            format!(
                "the signing key {}: not a PEM ECDSA P-256 private key (make one with: openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out cosign.key)",
                path.display()
            )
        })
}

/// `FILE.sig`: base64 of the DER signature, as `cosign sign-blob` writes it.
fn sign_file(key: &SigningKey, file: &Path) -> Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let signature: p256::ecdsa::Signature = key.sign(&bytes);
    let encoded = base64::engine::general_purpose::STANDARD.encode(signature.to_der());
    let mut out = file.as_os_str().to_owned();
    out.push(".sig");
    write(Path::new(&out), encoded.as_bytes())
}

/// Writes a blob into the layout; its descriptor's digest and size.
fn put_blob(layout: &Path, bytes: &[u8]) -> Result<(String, usize)> {
    let digest = sha256_digest(bytes);
    let hex = digest.trim_start_matches("sha256:");
    let dir = layout.join("blobs/sha256");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    write(&dir.join(hex), bytes)?;
    Ok((digest, bytes.len()))
}

/// The cosign signature of `digest` (the payload naming `repository` and
/// the digest, signed; its manifest, tagged `sha256-<hex>.sig` in the
/// layout's index, in place of any earlier one).
fn sign_image(key: &SigningKey, layout: &Path, digest: &str, repository: &str) -> Result<()> {
    let Some(tag) = signatures::signature_tag(digest) else {
        bail!("--digest {digest}: a sha256:<hex> digest is required");
    };
    let index_path = layout.join("index.json");
    let mut index: Value = serde_json::from_slice(
        &std::fs::read(&index_path).with_context(|| format!("reading {}", index_path.display()))?,
    )
    .with_context(|| format!("{}: not JSON", index_path.display()))?;
    let Some(manifests) = index["manifests"].as_array_mut() else {
        bail!("{}: no manifests list", index_path.display());
    };
    if !manifests.iter().any(|m| m["digest"] == digest) {
        bail!("{}: no manifest {digest} to sign", index_path.display());
    }
    let payload = serde_json::to_vec(&json!({
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": digest},
            "type": signatures::PAYLOAD_TYPE,
        },
        "optional": null,
    }))?;
    let signature: p256::ecdsa::Signature = key.sign(&payload);
    let signature = base64::engine::general_purpose::STANDARD.encode(signature.to_der());
    let (payload_digest, payload_size) = put_blob(layout, &payload)?;
    // cosign's own config for a signature manifest.
    let config = serde_json::to_vec(&json!({
        "architecture": "", "os": "", "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "rootfs": {"type": "layers", "diff_ids": [payload_digest]},
        "config": {},
    }))?;
    let (config_digest, config_size) = put_blob(layout, &config)?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "size": config_size, "digest": config_digest},
        "layers": [{
            "mediaType": signatures::SIMPLE_SIGNING,
            "size": payload_size,
            "digest": payload_digest,
            "annotations": {signatures::SIGNATURE_ANNOTATION: signature},
        }],
    }))?;
    let (manifest_digest, manifest_size) = put_blob(layout, &manifest)?;
    manifests.retain(|m| m["annotations"][REF_NAME] != tag.as_str());
    manifests.push(json!({
        "mediaType": OCI_MANIFEST,
        "digest": manifest_digest,
        "size": manifest_size,
        "annotations": {REF_NAME: tag},
    }));
    write(&index_path, &serde_json::to_vec(&index)?)
}
