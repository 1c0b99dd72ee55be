//! Test certificates, made with the openssl CLI (installed by
//! tests/scripts/install-deps.sh): a CA per test, CA-signed leaves (rustls
//! rejects a CA certificate used as a server certificate).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Runs a command, failing with its stderr.
pub fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// A P-256 private key (PKCS#8 PEM) at `dir/name`.
pub fn ec_key(dir: &Path, name: &str) -> Result<()> {
    run(Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(dir.join(name)))
}

/// `ca.key` and `ca.crt` in `dir`.
pub fn ca(dir: &Path) -> Result<()> {
    ec_key(dir, "ca.key")?;
    run(Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-new",
            "-nodes",
            "-days",
            "3650",
            "-subj",
            "/CN=bootc-operator-test-ca",
            "-key",
        ])
        .arg(dir.join("ca.key"))
        .arg("-out")
        .arg(dir.join("ca.crt")))
}

/// `name.key` and `name.crt` signed by the CA in `dir`, with the given
/// subject and X.509 extensions (openssl extfile syntax).
pub fn leaf(dir: &Path, name: &str, subject: &str, extensions: &str) -> Result<()> {
    ec_key(dir, &format!("{name}.key"))?;
    run(Command::new("openssl")
        .args(["req", "-new", "-subj", subject, "-key"])
        .arg(dir.join(format!("{name}.key")))
        .arg("-out")
        .arg(dir.join(format!("{name}.csr"))))?;
    std::fs::write(dir.join(format!("{name}.ext")), extensions)?;
    run(Command::new("openssl")
        .args(["x509", "-req", "-days", "3650", "-CAcreateserial", "-in"])
        .arg(dir.join(format!("{name}.csr")))
        .arg("-CA")
        .arg(dir.join("ca.crt"))
        .arg("-CAkey")
        .arg(dir.join("ca.key"))
        .arg("-extfile")
        .arg(dir.join(format!("{name}.ext")))
        .arg("-out")
        .arg(dir.join(format!("{name}.crt"))))
}

/// A serving certificate for 127.0.0.1 and localhost.
pub fn serving_leaf(dir: &Path, name: &str) -> Result<()> {
    serving_leaf_for(dir, name, &[])
}

/// A serving certificate for 127.0.0.1, localhost and the addresses `ips`
/// (a server inside a network namespace of the real-node cluster).
pub fn serving_leaf_for(dir: &Path, name: &str, ips: &[&str]) -> Result<()> {
    let extra: String = ips.iter().map(|ip| format!(",IP:{ip}")).collect();
    leaf(
        dir,
        name,
        "/CN=localhost",
        &format!(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc{extra}\n"
        ),
    )
}

/// A client certificate for `user` in `group` (`name.key`, `name.crt`).
pub fn client_leaf(dir: &Path, name: &str, user: &str, group: &str) -> Result<()> {
    leaf(
        dir,
        name,
        &format!("/O={group}/CN={user}"),
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n",
    )
}
