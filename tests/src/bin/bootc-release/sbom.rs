//! The image's SBOM, SPDX 2.3 JSON: the image, each crate its binaries'
//! packages depend on, each Debian package its libraries came from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// The packages of the image's binaries (bootc-controller, bootc-daemon,
/// bootc-helper), each built on its own as `./dev release` builds them, so
/// each has its own dependency tree.
pub const SHIPPED: &[(&str, &str)] = &[
    ("controller", "bootc-controller"),
    ("daemon", "bootc-daemon"),
    ("helper", "bootc-helper"),
];

/// One `[[package]]` of Cargo.lock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Locked {
    pub name: String,
    pub version: String,
    pub source: Option<String>,
    pub checksum: Option<String>,
}

/// Cargo.lock's packages (its `name`, `version`, `source`, `checksum`
/// lines; the file is cargo's, one key a line).
pub fn parse_lock(text: &str) -> Vec<Locked> {
    let mut out: Vec<Locked> = Vec::new();
    for line in text.lines() {
        if line == "[[package]]" {
            out.push(Locked::default());
            continue;
        }
        let (Some(package), Some((key, value))) = (out.last_mut(), line.split_once(" = \"")) else {
            continue;
        };
        let value = value.trim_end_matches('"').to_owned();
        match key {
            "name" => package.name = value,
            "version" => package.version = value,
            "source" => package.source = Some(value),
            "checksum" => package.checksum = Some(value),
            _ => {}
        }
    }
    out
}

/// The crates (name, version) of `cargo tree -e normal -p PACKAGE`, for
/// the host, with the features that package alone turns on.
pub fn crates_of(package: &str) -> Result<BTreeSet<(String, String)>> {
    let out = Command::new("cargo")
        .args(["tree", "--locked", "-e", "normal", "--prefix", "none"])
        .args(["--format", "{p}", "-p", package])
        .output()
        .context("running cargo tree")?;
    if !out.status.success() {
        bail!(
            "cargo tree -p {package}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?;
            let version = words.next()?.strip_prefix('v')?;
            Some((name.to_owned(), version.to_owned()))
        })
        .collect())
}

/// A Debian package: what `dpkg-query` says of it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Deb {
    pub name: String,
    pub version: String,
    pub arch: String,
    pub source: String,
    pub source_version: String,
}

fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The package that installed `lib` (`dpkg -S`), asked at its path, then
/// at the file it resolves to, then at its other name under merged /usr.
pub fn package_of(lib: &Path) -> Result<String> {
    let mut candidates = vec![lib.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(lib) {
        candidates.push(real);
    }
    let text = lib.to_string_lossy();
    candidates.push(match text.strip_prefix("/usr") {
        Some(rest) => PathBuf::from(rest),
        None => PathBuf::from(format!("/usr{text}")),
    });
    for path in &candidates {
        let Ok(said) = run(Command::new("dpkg").arg("-S").arg(path)) else {
            continue;
        };
        // `libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6`
        if let Some((package, _)) = said.lines().next().and_then(|l| l.split_once(": ")) {
            return Ok(package.split(", ").next().unwrap_or(package).to_owned());
        }
    }
    bail!("{}: no Debian package has it (dpkg -S)", lib.display())
}

/// What dpkg-query says of `package`.
pub fn deb(package: &str) -> Result<Deb> {
    let said = run(Command::new("dpkg-query").args([
        "-W",
        "-f",
        "${Package}\t${Version}\t${Architecture}\t${source:Package}\t${source:Version}",
        package,
    ]))?;
    let fields: Vec<&str> = said.trim_end().split('\t').collect();
    let [name, version, arch, source, source_version] = fields[..] else {
        bail!("dpkg-query -W {package}: {said:?}");
    };
    Ok(Deb {
        name: name.into(),
        version: version.into(),
        arch: arch.into(),
        source: source.into(),
        source_version: source_version.into(),
    })
}

/// The libraries the image carries for the binaries in `bin_dir`, by the
/// Debian package each came from.
fn libraries(bin_dir: &Path) -> Result<BTreeMap<Deb, Vec<String>>> {
    let listed = run(Command::new("tests/scripts/image-libraries.sh")
        .args(SHIPPED.iter().map(|(_, bin)| bin_dir.join(bin))))?;
    let mut out: BTreeMap<Deb, Vec<String>> = BTreeMap::new();
    for lib in listed.lines() {
        let deb = deb(&package_of(Path::new(lib))?)?;
        out.entry(deb).or_default().push(lib.to_owned());
    }
    Ok(out)
}

/// An SPDX identifier: letters, digits, `.` and `-` only.
fn spdx_id(kind: &str, name: &str, version: &str) -> String {
    let clean: String = format!("{name}-{version}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("SPDXRef-{kind}-{clean}")
}

fn crate_package(locked: &Locked) -> Value {
    let (name, version) = (&locked.name, &locked.version);
    let crates_io = locked
        .source
        .as_deref()
        .is_some_and(|s| s.starts_with("registry+https://github.com/rust-lang/crates.io-index"));
    let mut package = json!({
        "SPDXID": spdx_id("crate", name, version),
        "name": name,
        "versionInfo": version,
        "downloadLocation": if crates_io {
            format!("https://crates.io/api/v1/crates/{name}/{version}/download")
        } else {
            "NOASSERTION".to_owned()
        },
        "filesAnalyzed": false,
        "sourceInfo": locked.source.as_deref().map_or_else(
            || "this repository (a workspace member)".to_owned(),
            |s| format!("Cargo.lock source {s}"),
        ),
        "externalRefs": [{
            "referenceCategory": "PACKAGE-MANAGER",
            "referenceType": "purl",
            "referenceLocator": format!("pkg:cargo/{name}@{version}"),
        }],
    });
    if let Some(sum) = &locked.checksum {
        package["checksums"] = json!([{"algorithm": "SHA256", "checksumValue": sum}]);
    }
    package
}

fn deb_package(deb: &Deb, files: &[String]) -> Value {
    json!({
        "SPDXID": spdx_id("deb", &deb.name, &deb.version),
        "name": deb.name,
        "versionInfo": deb.version,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": false,
        "sourceInfo": format!("built from the Debian source package {} {}", deb.source, deb.source_version),
        "comment": format!("in the image: {}", files.join(", ")),
        "externalRefs": [{
            "referenceCategory": "PACKAGE-MANAGER",
            "referenceType": "purl",
            "referenceLocator": format!("pkg:deb/debian/{}@{}?arch={}", deb.name, deb.version, deb.arch),
        }],
    })
}

/// The document.
pub fn document(bin_dir: &Path, digest: &str, repository: &str, created: &str) -> Result<Value> {
    let version = env!("CARGO_PKG_VERSION");
    let lock = parse_lock(&std::fs::read_to_string("Cargo.lock").context("reading Cargo.lock")?);
    let mut crates = BTreeSet::new();
    for (package, _) in SHIPPED {
        crates.extend(crates_of(package)?);
    }
    let mut packages = vec![json!({
        "SPDXID": "SPDXRef-image",
        "name": "bootc-operator",
        "versionInfo": version,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": false,
        "primaryPackagePurpose": "CONTAINER",
        "checksums": [{"algorithm": "SHA256", "checksumValue": digest.trim_start_matches("sha256:")}],
        "externalRefs": [{
            "referenceCategory": "PACKAGE-MANAGER",
            "referenceType": "purl",
            "referenceLocator": format!("pkg:oci/bootc-operator@{}?repository_url={repository}", digest.replace(':', "%3A")),
        }],
    })];
    for (name, version) in &crates {
        let locked = lock
            .iter()
            .find(|l| &l.name == name && &l.version == version)
            .with_context(|| format!("{name} {version}: not in Cargo.lock"))?;
        packages.push(crate_package(locked));
    }
    for (deb, files) in libraries(bin_dir)? {
        packages.push(deb_package(&deb, &files));
    }
    let mut relationships = vec![json!({
        "spdxElementId": "SPDXRef-DOCUMENT",
        "relationshipType": "DESCRIBES",
        "relatedSpdxElement": "SPDXRef-image",
    })];
    for package in &packages[1..] {
        relationships.push(json!({
            "spdxElementId": "SPDXRef-image",
            "relationshipType": "CONTAINS",
            "relatedSpdxElement": package["SPDXID"],
        }));
    }
    Ok(json!({
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": format!("bootc-operator-{version}"),
        "documentNamespace": format!(
            "https://spdx.org/spdxdocs/bootc-operator-{version}-{}",
            digest.trim_start_matches("sha256:")
        ),
        "creationInfo": {"created": created, "creators": ["Tool: bootc-release (bootc-operator)"]},
        "packages": packages,
        "relationships": relationships,
    }))
}
