//! The CAs the registry client trusts, and the client built on them, kept
//! current while the controller runs.
//!
//! **The rule:** besides the system's roots, the client trusts the fixed
//! bundle it was started with (`--registry-ca-file`, read once: a file
//! named on the command line that is missing stops the start) and every
//! PEM file of the CA directory (`--registry-ca-dir`, where `deploy/`
//! mounts the optional ConfigMap `bootc-registry-ca`). The directory is
//! read again before every resolution that asks a registry, so a ConfigMap
//! created or changed after the start is trusted from the next resolution
//! on (a pool whose registry was not trusted tries again within
//! `tag_policy::MAX_RETRY_AFTER_ERROR`), with no restart and no watch: the
//! kubelet updates a ConfigMap volume by swapping the `..data` symlink the
//! files point through, so a read sees whole files (a read across a swap
//! that mixes old and new files is put right by the next), and hidden
//! entries (`..data`, the timestamped folders) are not CA files. The client
//! is rebuilt only when the bundle's bytes change (a new client drops its
//! connections); a directory that cannot be read keeps the client in force,
//! with a warning. Reading a few small files costs nothing next to the
//! HTTPS requests of the resolution it comes before.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::RegistryOptions;

/// The client in force and the bundle it trusts.
struct Current {
    bundle: Vec<u8>,
    http: Result<reqwest::Client, String>,
}

/// The registry client, rebuilt when the CA directory's bundle changes.
pub struct Trust {
    options: RegistryOptions,
    current: Mutex<Current>,
}

impl Trust {
    pub fn new(options: RegistryOptions) -> Self {
        let bundle = read_bundle(&options).unwrap_or_else(|error| {
            tracing::warn!(%error, "registry CA directory not read; trusting the others");
            fixed(&options)
        });
        let http = build(&options, &bundle);
        Trust {
            options,
            current: Mutex::new(Current { bundle, http }),
        }
    }

    /// The client that trusts what the CA sources hold now.
    pub fn client(&self) -> Result<reqwest::Client, String> {
        let Ok(mut current) = self.current.lock() else {
            return Err("the registry client's lock is poisoned".into());
        };
        match read_bundle(&self.options) {
            Ok(bundle) if bundle != current.bundle => {
                tracing::info!(
                    bytes = bundle.len(),
                    "the registry CAs changed: trusting them from now on"
                );
                current.http = build(&self.options, &bundle);
                current.bundle = bundle;
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "registry CA directory not read; keeping the CAs in force");
            }
        }
        current.http.clone()
    }
}

/// The client for `bundle` (none: the system's roots alone).
fn build(options: &RegistryOptions, bundle: &[u8]) -> Result<reqwest::Client, String> {
    let options = RegistryOptions {
        ca_bundle: (!bundle.is_empty()).then(|| bundle.to_vec()),
        ..options.clone()
    };
    super::client::http_client(&options)
}

/// The fixed bundle alone.
fn fixed(options: &RegistryOptions) -> Vec<u8> {
    options.ca_bundle.clone().unwrap_or_default()
}

/// The fixed bundle and the CA directory's files, one PEM bundle.
fn read_bundle(options: &RegistryOptions) -> Result<Vec<u8>, String> {
    let mut bundle = fixed(options);
    let Some(dir) = &options.ca_dir else {
        return Ok(bundle);
    };
    let named = |path: &Path, e: std::io::Error| format!("{}: {e}", path.display());
    for path in ca_dir_files(dir).map_err(|e| named(dir, e))? {
        bundle.push(b'\n');
        bundle.extend(std::fs::read(&path).map_err(|e| named(&path, e))?);
    }
    Ok(bundle)
}

/// The files of a CA directory in name order, hidden ones (a ConfigMap
/// volume's `..data` and its timestamped folders) left out; an absent
/// directory has none.
fn ca_dir_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        other => other?,
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if !hidden && entry.path().is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ConfigMap volume as the kubelet writes it: the files point through
    /// `..data` at a timestamped folder, swapped whole on a change.
    fn configmap_volume(dir: &Path, generation: &str, files: &[(&str, &str)]) {
        let folder = dir.join(format!("..{generation}"));
        std::fs::create_dir_all(&folder).unwrap();
        for (name, text) in files {
            std::fs::write(folder.join(name), text).unwrap();
        }
        let swap = dir.join("..data_tmp");
        std::os::unix::fs::symlink(format!("..{generation}"), &swap).unwrap();
        std::fs::rename(&swap, dir.join("..data")).unwrap();
        for (name, _) in files {
            let link = dir.join(name);
            if link.symlink_metadata().is_err() {
                std::os::unix::fs::symlink(format!("..data/{name}"), link).unwrap();
            }
        }
    }

    #[test]
    fn the_directory_is_read_through_the_kubelets_symlink_swap() {
        let dir = std::env::temp_dir().join(format!("registry-ca-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let options = RegistryOptions {
            ca_bundle: Some(b"FIXED".to_vec()),
            ca_dir: Some(dir.clone()),
            ..Default::default()
        };
        assert_eq!(read_bundle(&options).unwrap(), b"FIXED", "absent: none");
        configmap_volume(&dir, "2026_01_01", &[("b.crt", "B1"), ("a.crt", "A1")]);
        assert_eq!(read_bundle(&options).unwrap(), b"FIXED\nA1\nB1");
        configmap_volume(&dir, "2026_01_02", &[("b.crt", "B2"), ("a.crt", "A2")]);
        assert_eq!(read_bundle(&options).unwrap(), b"FIXED\nA2\nB2");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
