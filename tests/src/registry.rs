//! A real OCI registry for tests: Debian's `docker-registry` (distribution
//! 2.8) on loopback with TLS and htpasswd basic auth, and a pusher that
//! writes small test images with a real registry client.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use controller::target::registry::sha256_digest;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use crate::control_plane::{free_port, spawn_logged, tail};
use crate::pki;

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";

/// Installs rustls' ring provider as the process default (reqwest is built
/// without one, so that aws-lc is not compiled).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A running registry.
pub struct TestRegistry {
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// The address it serves on: loopback, or the bridge of the real-node
    /// cluster's network.
    address: String,
    port: u16,
    user: String,
    password: String,
}

impl std::fmt::Debug for TestRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRegistry")
            .field("port", &self.port)
            .finish()
    }
}

/// What to put in a test image.
#[derive(Clone, Debug)]
pub struct TestImage<'a> {
    pub architecture: &'a str,
    /// `org.opencontainers.image.version` label (bootc reports it as version).
    pub version: &'a str,
    /// Makes the content (and so the digest) unique.
    pub marker: &'a str,
}

impl TestRegistry {
    /// Starts a registry requiring `user`/`password`.
    pub async fn start(user: &str, password: &str) -> Result<Self> {
        Self::start_at(user, password, "127.0.0.1").await
    }

    /// Starts a registry requiring `user`/`password`, serving on `address`
    /// (an address of the network this process is in).
    pub async fn start_at(user: &str, password: &str, address: &str) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("bootc-registry-")
            .tempdir()?;
        let d = dir.path();
        pki::ca(d)?;
        let extra: Vec<&str> = Some(address)
            .filter(|a| *a != "127.0.0.1")
            .into_iter()
            .collect();
        pki::serving_leaf_for(d, "serving", &extra)?;
        let out = Command::new("htpasswd")
            .args(["-Bbn", user, password])
            .output()
            .context("running htpasswd (package apache2-utils)")?;
        if !out.status.success() {
            bail!("htpasswd failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::fs::write(d.join("htpasswd"), &out.stdout)?;
        let mut reg = TestRegistry {
            dir,
            child: None,
            address: address.to_owned(),
            port: free_port()?,
            user: user.to_owned(),
            password: password.to_owned(),
        };
        reg.write_config()?;
        reg.start_process().await?;
        Ok(reg)
    }

    fn write_config(&self) -> Result<()> {
        let d = self.dir.path();
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {data}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}:{port}\n  tls:\n    certificate: {crt}\n    key: {key}\nauth:\n  htpasswd:\n    realm: bootc-test\n    path: {htpasswd}\n",
            data = d.join("data").display(),
            address = self.address,
            port = self.port,
            crt = d.join("serving.crt").display(),
            key = d.join("serving.key").display(),
            htpasswd = d.join("htpasswd").display(),
        );
        std::fs::write(d.join("config.yml"), config)?;
        Ok(())
    }

    async fn start_process(&mut self) -> Result<()> {
        let d = self.dir.path();
        let child = spawn_logged(
            Path::new("docker-registry"),
            &["serve".into(), d.join("config.yml").display().to_string()],
            &d.join("registry.log"),
        )?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if tokio::net::TcpStream::connect((self.address.as_str(), self.port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                bail!(
                    "docker-registry exited with {status}:\n{}",
                    tail(&d.join("registry.log"))
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "docker-registry not listening after 30s:\n{}",
                    tail(&d.join("registry.log"))
                );
            }
            // Nothing to await but the port: poll it.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops the registry (its data stays), for "registry went away" tests.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port with the same data.
    pub async fn restart(&mut self) -> Result<()> {
        self.stop();
        self.start_process().await
    }

    /// `user:password`, as skopeo's `--creds` takes them.
    pub fn credentials(&self) -> String {
        format!("{}:{}", self.user, self.password)
    }

    /// The user and password it requires.
    pub fn login(&self) -> (&str, &str) {
        (&self.user, &self.password)
    }

    /// `<address>:<port>` (`127.0.0.1:<port>` unless started elsewhere).
    pub fn host(&self) -> String {
        format!("{}:{}", self.address, self.port)
    }

    /// The CA certificate (PEM) that signed the registry's certificate.
    pub fn ca_pem(&self) -> Result<Vec<u8>> {
        Ok(std::fs::read(self.ca_path())?)
    }

    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A docker config JSON (`.dockerconfigjson`) with these credentials.
    pub fn docker_config(&self, user: &str, password: &str) -> String {
        use base64::Engine;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        serde_json::json!({"auths": {self.host(): {"auth": auth}}}).to_string()
    }

    /// The docker config JSON with the right credentials.
    pub fn good_docker_config(&self) -> String {
        self.docker_config(&self.user, &self.password)
    }

    fn client(&self) -> Result<Client> {
        install_crypto_provider();
        Ok(Client::new(ClientConfig {
            extra_root_certificates: vec![Certificate {
                encoding: CertificateEncoding::Pem,
                data: self.ca_pem()?,
            }],
            ..Default::default()
        }))
    }

    fn auth(&self) -> RegistryAuth {
        RegistryAuth::Basic(self.user.clone(), self.password.clone())
    }

    fn reference(&self, repo: &str, tag: &str) -> Result<Reference> {
        format!("{}/{repo}:{tag}", self.host())
            .parse()
            .with_context(|| format!("reference {repo}:{tag}"))
    }

    /// Pushes a single-platform OCI image under `repo:tag`; returns the
    /// manifest digest.
    pub async fn push_image(&self, repo: &str, tag: &str, image: &TestImage<'_>) -> Result<String> {
        self.push_image_labelled(repo, tag, image, &[]).await
    }

    /// [`Self::push_image`] with more config labels, or other values of
    /// the usual ones (`containers.bootc`, the version); an empty value
    /// removes the label.
    pub async fn push_image_labelled(
        &self,
        repo: &str,
        tag: &str,
        image: &TestImage<'_>,
        labels: &[(&str, &str)],
    ) -> Result<String> {
        let reference = self.reference(repo, tag)?;
        let (config, layer) = image_parts(image, labels, OCI_CONFIG);
        let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
        let client = self.client()?;
        let resp = client
            .push(&reference, &[layer], config, &self.auth(), Some(manifest))
            .await
            .with_context(|| format!("pushing {reference}"))?;
        digest_from_url(&resp.manifest_url)
    }

    /// Pushes a single-platform image with Docker schema 2 media types.
    pub async fn push_docker_image(
        &self,
        repo: &str,
        tag: &str,
        image: &TestImage<'_>,
    ) -> Result<String> {
        let reference = self.reference(repo, tag)?;
        let (config, layer) = image_parts(image, &[], DOCKER_CONFIG);
        let client = self.client()?;
        client
            .store_auth_if_needed(reference.resolve_registry(), &self.auth())
            .await;
        // Blobs first, then a Docker-typed manifest pointing at them.
        let layer_digest = sha256_digest(&layer.data);
        let config_digest = sha256_digest(&config.data);
        client
            .push_blob(&reference, layer.data.clone(), &layer_digest)
            .await?;
        client
            .push_blob(&reference, config.data.clone(), &config_digest)
            .await?;
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST,
            "config": {"mediaType": DOCKER_CONFIG, "size": config.data.len(), "digest": config_digest},
            "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": layer.data.len(), "digest": layer_digest}],
        });
        let body = serde_json::to_vec(&manifest)?;
        let digest = sha256_digest(&body);
        client
            .push_manifest_raw(&reference, body, DOCKER_MANIFEST.parse()?)
            .await
            .with_context(|| format!("pushing {reference}"))?;
        Ok(digest)
    }

    /// Pushes an OCI index under `repo:tag` over images already pushed to
    /// `repo` (given as `(architecture, manifest digest)`); returns the
    /// index digest.
    pub async fn push_index(
        &self,
        repo: &str,
        tag: &str,
        entries: &[(&str, &str)],
    ) -> Result<String> {
        let reference = self.reference(repo, tag)?;
        let client = self.client()?;
        client
            .store_auth_if_needed(reference.resolve_registry(), &self.auth())
            .await;
        let mut manifests = Vec::new();
        for (arch, digest) in entries {
            let by_digest: Reference = format!("{}/{repo}@{digest}", self.host()).parse()?;
            let (raw, _) = client
                .pull_manifest_raw(&by_digest, &self.auth(), &[OCI_MANIFEST])
                .await?;
            manifests.push(serde_json::json!({
                "mediaType": OCI_MANIFEST,
                "digest": digest,
                "size": raw.len(),
                "platform": {"architecture": arch, "os": "linux"},
            }));
        }
        let index = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": manifests,
        });
        let body = serde_json::to_vec(&index)?;
        let digest = sha256_digest(&body);
        client
            .push_manifest_raw(&reference, body, OCI_INDEX.parse()?)
            .await
            .with_context(|| format!("pushing index {reference}"))?;
        Ok(digest)
    }

    /// Signs `digest` (an image of `repo`) as `cosign sign --key` does,
    /// writing exactly cosign's layout: the simple signing payload (naming
    /// `signed_digest` and the identity `host/repo`) as a blob, an OCI
    /// config, and the manifest at the tag `sha256-<hex>.sig` whose layer
    /// carries the signature (ECDSA P-256 over SHA-256, DER, base64) in
    /// `dev.cosignproject.cosign/signature`. `signed_digest` other than
    /// `digest` makes a signature for another image stored as this one's.
    pub async fn push_cosign_signature(
        &self,
        repo: &str,
        digest: &str,
        signed_digest: &str,
        key: &p256::ecdsa::SigningKey,
    ) -> Result<()> {
        use base64::Engine;
        use controller::target::registry::signatures;
        use p256::ecdsa::signature::Signer;
        let tag = signatures::signature_tag(digest).context("not a sha256 digest")?;
        let reference = self.reference(repo, &tag)?;
        let client = self.client()?;
        client
            .store_auth_if_needed(reference.resolve_registry(), &self.auth())
            .await;
        let payload = serde_json::to_vec(&serde_json::json!({
            "critical": {
                "identity": {"docker-reference": format!("{}/{repo}", self.host())},
                "image": {"docker-manifest-digest": signed_digest},
                "type": signatures::PAYLOAD_TYPE,
            },
            "optional": null,
        }))?;
        let signature: p256::ecdsa::Signature = key.sign(&payload);
        let signature = base64::engine::general_purpose::STANDARD.encode(signature.to_der());
        let payload_digest = sha256_digest(&payload);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "", "os": "", "created": "0001-01-01T00:00:00Z",
            "history": [{"created": "0001-01-01T00:00:00Z"}],
            "rootfs": {"type": "layers", "diff_ids": [payload_digest]},
            "config": {},
        }))?;
        let config_digest = sha256_digest(&config);
        client
            .push_blob(&reference, payload.clone(), &payload_digest)
            .await?;
        client
            .push_blob(&reference, config.clone(), &config_digest)
            .await?;
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "size": config.len(), "digest": config_digest},
            "layers": [{
                "mediaType": signatures::SIMPLE_SIGNING,
                "size": payload.len(),
                "digest": payload_digest,
                "annotations": {signatures::SIGNATURE_ANNOTATION: signature},
            }],
        });
        client
            .push_manifest_raw(
                &reference,
                serde_json::to_vec(&manifest)?,
                OCI_MANIFEST.parse()?,
            )
            .await
            .with_context(|| format!("pushing the signature {reference}"))?;
        Ok(())
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn image_parts(
    image: &TestImage<'_>,
    labels: &[(&str, &str)],
    config_media_type: &str,
) -> (Config, ImageLayer) {
    let mut all = serde_json::Map::new();
    all.insert(
        api::image_labels::IMAGE_VERSION.into(),
        image.version.into(),
    );
    all.insert(api::image_labels::CONTAINERS_BOOTC.into(), "1".into());
    for (key, value) in labels {
        if value.is_empty() {
            all.remove(*key);
        } else {
            all.insert((*key).into(), (*value).into());
        }
    }
    let config = serde_json::json!({
        "architecture": image.architecture,
        "os": "linux",
        "config": {"Labels": all},
        "rootfs": {"type": "layers", "diff_ids": []},
    });
    let config = Config {
        data: serde_json::to_vec(&config).unwrap_or_default().into(),
        media_type: config_media_type.into(),
        annotations: None,
    };
    let layer = ImageLayer {
        data: format!("bootc test layer {} {}", image.version, image.marker)
            .into_bytes()
            .into(),
        media_type: OCI_LAYER.into(),
        annotations: None,
    };
    (config, layer)
}

fn digest_from_url(url: &str) -> Result<String> {
    url.rsplit('/')
        .next()
        .filter(|d| d.starts_with("sha256:"))
        .map(str::to_owned)
        .with_context(|| format!("no digest in manifest URL {url}"))
}
