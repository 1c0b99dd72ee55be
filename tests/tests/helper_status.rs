#![allow(clippy::unwrap_used, clippy::expect_used)]
//! bootc's status format: the helper's parser takes every upstream fixture,
//! and the fake bootc's output is valid against bootc's JSON schema. bootc's
//! schema and fixtures are read from the shared fixtures
//! (`tests::bootc_fixtures`), never copied into this repository.

use std::path::Path;
use tests::fake_bootc::{Deployment, State, status_json};

#[test]
fn status_parser_accepts_every_upstream_fixture() {
    let fixtures = tests::require_bootc_fixtures!();
    let mut seen = 0;
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("spec-") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let host: helper::status::Host = if name.ends_with(".json") {
            helper::status::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"))
        } else {
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        // The mapping to the protocol never fails either.
        let reply = helper::status::response(&host);
        if name == "spec-staged-download-only.yaml" {
            let staged = reply.staged.as_ref().unwrap();
            assert!(staged.download_only);
            assert_eq!(staged.architecture, "arm64");
            assert_eq!(staged.version.as_deref(), Some("nightly"));
            assert!(!reply.booted.as_ref().unwrap().download_only);
        }
        if name == "spec-staged-rollback.yaml" {
            assert!(reply.booted.is_none(), "booted may be null");
            assert!(reply.staged.is_some() && reply.rollback.is_some());
        }
        if name == "spec-v1-null.json" {
            assert!(reply.booted.is_none() && reply.staged.is_none());
        }
        if name == "spec-rfe-ostree-deployment.yaml" {
            let staged = reply.staged.as_ref().unwrap();
            assert!(staged.incompatible);
            assert!(staged.image.is_empty());
        }
        seen += 1;
    }
    assert_eq!(seen, 16, "every spec-* fixture parsed");
}

fn validate_against_schema(fixtures: &Path, json: &serde_json::Value) -> Result<(), String> {
    let schema = fixtures.join("host-v1.schema.json");
    let script = "import json,sys,jsonschema\n\
        schema=json.load(open(sys.argv[1]))\n\
        jsonschema.Draft202012Validator.check_schema(schema)\n\
        errs=list(jsonschema.Draft202012Validator(schema).iter_errors(json.load(sys.stdin)))\n\
        print('\\n'.join(str(e.message)+' at '+str(list(e.path)) for e in errs))\n\
        sys.exit(1 if errs else 0)\n";
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(schema)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("python3 (python3-jsonschema from tests/scripts/install-deps.sh): {e}")
        })?;
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn fake_bootc_status_is_valid_against_bootc_schema() {
    let fixtures = tests::require_bootc_fixtures!();
    let a = "127.0.0.1:5000/os@sha256:".to_owned() + &"a".repeat(64);
    let b = "127.0.0.1:5000/os@sha256:".to_owned() + &"b".repeat(64);
    let mut staged = Deployment::of(&b);
    staged.download_only = true;
    staged.soft_reboot_capable = true;
    staged.version = None;
    let states = [
        State::default(),
        State {
            booted: Some(Deployment::of(&a)),
            ..State::default()
        },
        State {
            booted: Some(Deployment::of(&a)),
            staged: Some(staged),
            rollback: Some(Deployment::of(&b)),
            nextroot: false,
        },
    ];
    for state in &states {
        let json = status_json(state);
        validate_against_schema(&fixtures, &json).unwrap_or_else(|e| panic!("{state:?}: {e}"));
        // And the helper reads back what it says.
        let host = helper::status::parse(json.to_string().as_bytes()).unwrap();
        let reply = helper::status::response(&host);
        assert_eq!(
            reply.booted.map(|b| b.image),
            state.booted.as_ref().map(|b| b.image.clone())
        );
    }
    // The schema check itself has teeth.
    let mut bad = status_json(&states[1]);
    bad["status"]["booted"]["incompatible"] = serde_json::json!("no");
    assert!(validate_against_schema(&fixtures, &bad).is_err());
}
