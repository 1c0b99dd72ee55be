//! The fake bootc against the contract reference (`reference/bootc-contract.md`
//! beside the shared fixtures): every case the reference records for the
//! commands the node agent runs, replayed in-process on a fake host layout,
//! on both bootc versions. bootc's own rendered help and usage-error texts
//! (the shared fixtures' `contract/help/`) are compared byte for byte.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tests::fake_bootc::cli::HelpTopic;
use tests::fake_bootc::{AUTH_FILES, Environment};
use tests::fake_bootc::{
    BootcVersion, Deployment, Fault, Layout, Outcome, State, UnplannedReboot, run, status_text,
};

const A: &str =
    "quay.io/acme/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str =
    "quay.io/acme/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

struct Host {
    layout: Layout,
    _dir: tempfile::TempDir,
}

fn host(version: BootcVersion) -> Host {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path());
    layout.init(Some(A)).unwrap();
    layout.set_version(version).unwrap();
    Host { layout, _dir: dir }
}

fn v(args: &str) -> Vec<String> {
    args.split_whitespace().map(str::to_owned).collect()
}

fn bootc(h: &Host, args: &str) -> Outcome {
    run(&h.layout, &v(args), &Environment::root()).unwrap()
}

fn state(h: &Host) -> State {
    h.layout.read_state().unwrap()
}

fn staged(h: &Host, image: &str, locked: bool) {
    let mut s = state(h);
    let mut d = Deployment::of(image);
    d.download_only = locked;
    d.soft_reboot_capable = true;
    s.staged = Some(d);
    h.layout.write_state(&s).unwrap();
}

fn mtime(h: &Host) -> std::time::SystemTime {
    std::fs::metadata(h.layout.ostree_bootc())
        .unwrap()
        .modified()
        .unwrap()
}

/// Section 2.1 and 2.6: bootc's rendered usage errors (stderr, exit 2) and
/// the argv clap accepts, for `switch` and `status`, per version.
#[test]
fn usage_errors_are_bootcs_byte_for_byte() {
    let fixtures = tests::require_bootc_fixtures!();
    for version in BootcVersion::ALL {
        let file = fixtures.join(format!(
            "contract/help/clap-usage-errors.{}.txt",
            version.fixture_suffix()
        ));
        let text = std::fs::read_to_string(&file).unwrap();
        let mut replayed = 0;
        for block in text.split("### argv: bootc ").skip(1) {
            let (argv, rest) = block.split_once('\n').unwrap();
            let modelled = ["switch", "status", "upgrade"];
            if !modelled.iter().any(|c| argv.starts_with(c)) {
                eprintln!("not replayed (not modelled): bootc {argv}");
                continue;
            }
            let h = host(version);
            let out = bootc(&h, argv);
            let (result, body) = rest.split_once('\n').unwrap();
            if result.contains("accepted by clap") {
                assert_ne!(out.code, 2, "{version:?} bootc {argv}: {}", out.stderr);
            } else {
                assert!(result.contains("exit code 2, stream stderr"), "{result}");
                let expected = body.split("### end").next().unwrap();
                assert_eq!(out.code, 2, "{version:?} bootc {argv}");
                assert_eq!(out.stderr, expected, "{version:?} bootc {argv}");
                assert!(out.stdout.is_empty());
            }
            replayed += 1;
        }
        assert!(
            replayed >= 11,
            "{version:?}: only {replayed} cases replayed"
        );
    }
}

/// Section 2.6: `switch --help`, `switch -h` and `status --help` are bootc's
/// files byte for byte (stdout, exit 0); without them our own short texts
/// carry the same flags, and the helper's detection works on both.
#[test]
fn help_is_bootcs_text_or_our_own_with_the_same_flags() {
    let fixtures = tests::require_bootc_fixtures!();
    for version in BootcVersion::ALL {
        let h = host(version);
        for (args, file) in [
            ("switch --help", "bootc-switch--help"),
            ("switch -h", "bootc-switch-h"),
            ("status --help", "bootc-status--help"),
            ("upgrade --help", "bootc-upgrade--help"),
        ] {
            let out = bootc(&h, args);
            let want = std::fs::read_to_string(fixtures.join(format!(
                "contract/help/{file}.{}.txt",
                version.fixture_suffix()
            )))
            .unwrap();
            assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{args}");
            assert_eq!(out.stdout, want, "{version:?} bootc {args}");
        }
        let bootcs = bootc(&h, "switch --help").stdout;
        h.layout.use_own_help().unwrap();
        let own = bootc(&h, "switch --help").stdout;
        assert_ne!(own, bootcs, "our own wording, not bootc's");
        for text in [&bootcs, &own] {
            assert_eq!(
                helper::bootc::help_supports_download_only(text),
                version.has_download_only(),
                "{version:?}"
            );
            for flag in ["--apply", "--soft-reboot", "--transport", "--quiet"] {
                assert!(text.contains(flag), "{version:?} {flag}");
            }
        }
        assert_eq!(
            tests::fake_bootc::run(&h.layout, &v("switch -h"), &Environment::root())
                .unwrap()
                .code,
            0
        );
        let _ = HelpTopic::SwitchShort;
    }
}

/// Section 4.2: the same-image rules, on both versions.
#[test]
fn same_image_rules() {
    for version in BootcVersion::ALL {
        let download = if version.has_download_only() {
            "--download-only "
        } else {
            ""
        };
        // IMG == booted, nothing staged: unchanged, nothing staged; with
        // --apply nothing happens either.
        let h = host(version);
        let before = mtime(&h);
        for args in [
            format!("switch {download}-- {A}"),
            format!("switch --apply -- {A}"),
        ] {
            let out = bootc(&h, &args);
            assert_eq!(
                (out.code, out.stdout.as_str(), out.park),
                (0, "Image specification is unchanged.\n", false),
                "{version:?} {args}"
            );
            assert_eq!(state(&h).staged, None);
        }
        assert!(h.layout.read_reboots().is_empty());
        assert_eq!(mtime(&h), before, "no mtime on the unchanged path");

        // IMG == staged: unchanged, lock state kept either way.
        for locked in [true, false] {
            let h = host(version);
            staged(&h, B, locked);
            let before = state(&h);
            for args in [format!("switch -- {B}"), format!("switch {download}-- {B}")] {
                let out = bootc(&h, &args);
                assert_eq!(out.stdout, "Image specification is unchanged.\n");
                assert_eq!(state(&h), before, "{version:?} locked={locked} {args}");
            }
        }

        // IMG == booted while another image is staged: a redeploy of the
        // booted image is staged (staged is not cleared).
        let h = host(version);
        staged(&h, B, true);
        let out = bootc(&h, &format!("switch {download}-- {A}"));
        assert_eq!(out.code, 0);
        let s = state(&h);
        assert_eq!(s.staged.as_ref().unwrap().image, A);
        assert_eq!(s.staged.unwrap().digest, s.booted.unwrap().digest);

        // A new image: staged, with bootc's lines; the mtime moves.
        let h = host(version);
        let before = mtime(&h);
        std::thread::sleep(std::time::Duration::from_millis(10));
        let out = bootc(&h, &format!("switch {download}-- {B}"));
        let first = if version.has_download_only() {
            "Staged but not queued for next boot"
        } else {
            "Queued for next boot"
        };
        assert_eq!(
            out.stdout,
            format!(
                "{first}: {B}\n  Version: 1\n  Digest: sha256:{}\n",
                "b".repeat(64)
            )
        );
        let s = state(&h).staged.unwrap();
        assert_eq!(s.download_only, version.has_download_only());
        assert_ne!(mtime(&h), before);
    }
}

/// Sections 4.2 and 5.3: `switch --apply <staged image>` reboots; a locked
/// staged deployment is then not applied, an unlocked one is. This is the
/// old-bootc apply the helper uses.
#[test]
fn apply_on_the_unchanged_path() {
    for (locked, boots) in [(false, B), (true, A)] {
        let h = host(BootcVersion::V1_16);
        staged(&h, B, locked);
        let out = bootc(&h, &format!("switch --apply -- {B}"));
        assert_eq!(out.stdout, "Image specification is unchanged.\n");
        assert!(out.park, "a successful --apply never returns");
        let s = state(&h);
        assert_eq!(s.booted.unwrap().image, boots, "locked={locked}");
        assert_eq!(s.staged, None);
        let r = &h.layout.read_reboots()[0];
        assert!(!r.soft && !r.unplanned);
        assert_ne!(r.old_boot_id, r.new_boot_id);
    }
}

/// ostree's finalization lock file, where the contract reference is silent
/// (ostree v2025.7, `src/libostree/ostree-sysroot-deploy.c`): finalization
/// skips a staged deployment while `/run/ostree/staged-deployment-locked`
/// exists, whatever its own flag says (`:4048`); staging over a staged
/// deployment removes the file (`:3903`, ostree commit ac69c707, v2023.7);
/// unlocking with `--from-downloaded` removes it only when the flag was set
/// (`ostree_sysroot_change_finalization`, `:3971`). This is how the helper
/// locks its staging on released bootc.
#[test]
fn ostree_lock_file_holds_an_unlocked_staged_deployment() {
    const C: &str =
        "quay.io/acme/os@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
    let lock = |h: &Host| h.layout.finalization_lock();
    let create = |h: &Host| {
        std::fs::create_dir_all(lock(h).parent().unwrap()).unwrap();
        std::fs::write(lock(h), "").unwrap();
    };
    // Nothing staged: the file survives the stage, and an orderly reboot
    // boots what ran; /run is gone with the boot.
    let h = host(BootcVersion::V1_16);
    create(&h);
    assert_eq!(bootc(&h, &format!("switch -- {B}")).code, 0);
    assert!(
        !state(&h).staged.unwrap().download_only,
        "bootc's flag says unlocked"
    );
    assert!(lock(&h).exists());
    let r = h.layout.reboot_unplanned(UnplannedReboot::Orderly).unwrap();
    assert!(!r.applied_staged);
    assert_eq!(state(&h).booted.unwrap().image, A);
    assert!(!lock(&h).exists());

    // Staging over a staged deployment removes the file.
    let h = host(BootcVersion::V1_16);
    create(&h);
    bootc(&h, &format!("switch -- {B}"));
    assert_eq!(bootc(&h, &format!("switch -- {C}")).code, 0);
    assert!(!lock(&h).exists(), "ostree drops the lock when re-staging");

    // `switch --apply <staged>` reboots, and the file still holds it.
    let h = host(BootcVersion::V1_16);
    create(&h);
    bootc(&h, &format!("switch -- {B}"));
    assert!(bootc(&h, &format!("switch --apply -- {B}")).park);
    assert_eq!(state(&h).booted.unwrap().image, A);

    // --from-downloaded on an unlocked flag keeps the file (and the reboot
    // boots nothing new); on a locked flag it removes it.
    for (flag, boots) in [(false, A), (true, B)] {
        let h = host(BootcVersion::Pr);
        staged(&h, B, flag);
        create(&h);
        assert!(bootc(&h, "switch --from-downloaded --apply").park);
        assert_eq!(state(&h).booted.unwrap().image, boots, "flag={flag}");
    }
}

/// Section 5.5: `upgrade --from-downloaded [--apply] [--soft-reboot=auto]`,
/// the apply the helper runs on every version (v1.12+): the same as
/// `switch --from-downloaded` under bootc's `Upgrading` context, soft reboot
/// included; any other upgrade is not modelled and says so.
#[test]
fn upgrade_from_downloaded() {
    for version in BootcVersion::ALL {
        let h = host(version);
        let out = bootc(&h, "upgrade --from-downloaded --apply");
        assert_eq!(
            (out.code, out.stderr.as_str()),
            (1, "error: Upgrading: No staged deployment found\n"),
            "{version:?}"
        );
        staged(&h, B, false);
        let out = bootc(&h, "upgrade --from-downloaded --apply --soft-reboot=auto");
        assert_eq!(
            out.stdout,
            "Staged deployment is already set to apply on reboot\nStaged deployment is soft-reboot capable, preparing for soft-reboot...\n"
        );
        assert!(out.park);
        let r = &h.layout.read_reboots()[0];
        assert!(r.soft && r.applied_staged, "{version:?}");
        assert_eq!(state(&h).booted.unwrap().image, B);
        let out = bootc(&h, "upgrade --apply");
        assert_eq!(out.code, 1, "{version:?}: {}", out.stderr);
        assert!(out.stderr.contains("not modelled"));
    }
}

/// Section 5.4: `switch --from-downloaded [--apply]`.
#[test]
fn from_downloaded() {
    let h = host(BootcVersion::Pr);
    let out = bootc(&h, "switch --from-downloaded --apply");
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (
            1,
            "error: Switching: Switching (ostree): No staged deployment found\n"
        )
    );
    // Without --apply: unlocks, exit 0, no reboot.
    staged(&h, B, true);
    let out = bootc(&h, "switch --from-downloaded");
    assert_eq!(
        (out.code, out.stdout.as_str(), out.park),
        (
            0,
            "Staged deployment will now be applied on reboot\n",
            false
        )
    );
    assert!(!state(&h).staged.unwrap().download_only);
    // Already unlocked: says so, carries on; --apply boots it.
    let out = bootc(&h, "switch --from-downloaded --apply");
    assert_eq!(
        out.stdout,
        "Staged deployment is already set to apply on reboot\n"
    );
    assert!(out.park);
    let s = state(&h);
    assert_eq!(s.booted.unwrap().image, B);
    assert_eq!(s.rollback.unwrap().image, A);
    assert_eq!(s.staged, None);
    // It checks nothing about which image is staged.
    let h = host(BootcVersion::Pr);
    staged(
        &h,
        "quay.io/other/os@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
        true,
    );
    assert_eq!(bootc(&h, "switch --from-downloaded --apply").code, 0);
    assert!(state(&h).booted.unwrap().image.starts_with("quay.io/other"));
}

/// Section 6: `--soft-reboot=auto|required` against `softRebootCapable`.
#[test]
fn soft_reboot_against_capability() {
    for (capable, mode, code, soft) in [
        (true, "auto", 0, Some(true)),
        (false, "auto", 0, Some(false)),
        (true, "required", 0, Some(true)),
        (false, "required", 1, None),
    ] {
        let h = host(BootcVersion::Pr);
        staged(&h, B, true);
        let mut s = state(&h);
        s.staged.as_mut().unwrap().soft_reboot_capable = capable;
        h.layout.write_state(&s).unwrap();
        let out = bootc(
            &h,
            &format!("switch --from-downloaded --apply --soft-reboot={mode}"),
        );
        let case = format!("capable={capable} {mode}");
        assert_eq!(out.code, code, "{case}: {}", out.stderr);
        let reboots = h.layout.read_reboots();
        match soft {
            Some(soft) => {
                assert!(out.park, "{case}");
                assert_eq!(reboots[0].soft, soft, "{case}");
                assert_eq!(
                    reboots[0].old_boot_id == reboots[0].new_boot_id,
                    soft,
                    "{case}"
                );
                assert_eq!(
                    out.stdout
                        .contains("soft-reboot capable, preparing for soft-reboot"),
                    capable
                );
            }
            None => {
                assert!(reboots.is_empty(), "{case}");
                assert_eq!(
                    out.stderr,
                    "error: Switching: Switching (ostree): Handling staged soft reboot: Handling soft reboot: Soft reboot was required but staged deployment is not soft-reboot capable\n"
                );
                // Failed after the unlock: left unlocked.
                assert!(!state(&h).staged.unwrap().download_only);
            }
        }
    }
    // Ignored on the unchanged path: a full reboot.
    let h = host(BootcVersion::Pr);
    staged(&h, B, false);
    let out = bootc(&h, &format!("switch --apply --soft-reboot=auto -- {B}"));
    assert!(out.park);
    assert!(!h.layout.read_reboots()[0].soft);
}

/// Section 5.3: unplanned reboots, locked and unlocked, orderly and crash.
#[test]
fn unplanned_reboots() {
    for (locked, kind, boots, applied) in [
        (true, UnplannedReboot::Orderly, A, false),
        (true, UnplannedReboot::Crash, A, false),
        (false, UnplannedReboot::Orderly, B, true),
        (false, UnplannedReboot::Crash, A, false),
    ] {
        let h = host(BootcVersion::Pr);
        staged(&h, B, locked);
        let r = h.layout.reboot_unplanned(kind).unwrap();
        let s = state(&h);
        let case = format!("locked={locked} {kind:?}");
        assert_eq!(s.booted.as_ref().unwrap().image, boots, "{case}");
        assert_eq!(s.staged, None, "{case}");
        assert_eq!(r.applied_staged, applied, "{case}");
        assert!(r.unplanned && !r.soft);
        assert_ne!(r.old_boot_id, r.new_boot_id);
        if applied {
            assert_eq!(s.rollback.unwrap().image, A);
        }
    }
    // A prepared /run/nextroot makes an orderly reboot soft.
    let h = host(BootcVersion::Pr);
    staged(&h, B, false);
    assert_eq!(
        bootc(&h, "switch --from-downloaded --soft-reboot=auto").code,
        0
    );
    assert!(state(&h).nextroot);
    let r = h.layout.reboot_unplanned(UnplannedReboot::Orderly).unwrap();
    assert!(r.soft && r.applied_staged);
    assert_eq!(r.old_boot_id, r.new_boot_id);
}

/// Section 7: the status JSON's shape, and its argv.
#[test]
fn status_shape() {
    let h = host(BootcVersion::Pr);
    staged(&h, B, true);
    let out = bootc(&h, "status --format=json --format-version=1");
    assert_eq!(out.code, 0);
    assert!(!out.stdout.ends_with('\n'), "no trailing newline");
    assert!(!out.stdout.contains(' ') && !out.stdout.contains('\n'));
    assert!(
        !out.stdout.contains("signature"),
        "no signature for a plain switch"
    );
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        serde_json::to_string(&json).unwrap(),
        out.stdout,
        "canonical (sorted keys)"
    );
    for key in ["readOnly", "usrOverlay", "rollbackQueued", "type"] {
        assert!(json["status"].get(key).is_some(), "{key}");
    }
    let staged = &json["status"]["staged"];
    assert_eq!(staged["downloadOnly"], true);
    assert!(staged.get("composefs").is_some());
    assert_ne!(
        staged["ostree"]["checksum"], json["status"]["booted"]["ostree"]["checksum"],
        "distinct checksums"
    );
    assert_eq!(
        bootc(&h, "status --format-version=0 --format=json").stdout,
        out.stdout
    );
    let out = bootc(&h, "status --format=json --format-version=2");
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (1, "error: Status: Unsupported format version: 2\n")
    );
    let booted_only: serde_json::Value =
        serde_json::from_str(&bootc(&h, "status --format=json --booted").stdout).unwrap();
    assert!(booted_only["status"]["staged"].is_null());
    assert!(
        bootc(&h, "status")
            .stdout
            .contains("apiVersion: org.containers.bootc/v1")
    );
}

const NOT_DEPLOYED: &str = r#"{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","metadata":{"name":"host"},"spec":{"bootOrder":"default","image":null},"status":{"booted":null,"readOnly":false,"rollback":null,"rollbackQueued":false,"staged":null,"type":null,"usrOverlay":null}}"#;

/// Sections 3 and 7.4: the environment checks.
#[test]
fn environment_checks() {
    let h = host(BootcVersion::Pr);
    let switch = v(&format!("switch --download-only -- {B}"));
    let status = v("status --format=json --format-version=1");
    let container = Environment {
        container: true,
        ..Environment::root()
    };
    let out = run(&h.layout, &switch, &container).unwrap();
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (
            1,
            "error: Switching: Initializing storage: Preparing for write: Detected container; this command requires a booted host system.\n"
        )
    );
    let out = run(&h.layout, &status, &container).unwrap();
    assert_eq!((out.code, out.stdout.as_str()), (0, NOT_DEPLOYED));
    let user = Environment {
        uid: 65534,
        ..Environment::root()
    };
    for args in [&switch, &status] {
        let out = run(&h.layout, args, &user).unwrap();
        assert_eq!(out.code, 1);
        assert!(
            out.stderr.ends_with(
                "Preparing for write: Querying root privilege: This command must be executed as the root user\n"
            ),
            "{}",
            out.stderr
        );
    }
    let no_cap = Environment {
        cap_sys_admin_bounding: false,
        ..Environment::root()
    };
    let out = run(&h.layout, &switch, &no_cap).unwrap();
    assert!(
        out.stderr
            .ends_with("This command requires full root privileges (CAP_SYS_ADMIN)\n")
    );
    // Help works anywhere.
    assert_eq!(run(&h.layout, &v("switch --help"), &user).unwrap().code, 0);
    // Not booted via bootc.
    let empty = tempfile::tempdir().unwrap();
    let layout = Layout::new(empty.path());
    layout.init(None).unwrap();
    layout.set_version(BootcVersion::Pr).unwrap();
    let out = run(&layout, &switch, &Environment::root()).unwrap();
    assert_eq!(
        out.stderr,
        "error: Switching: Initializing storage: System not booted via bootc\n"
    );
    assert_eq!(status_text(&State::default()), NOT_DEPLOYED);
}

/// Section 4.2: error texts, exit 1, nothing staged.
#[test]
fn pull_errors_in_bootcs_words() {
    let prefix = "error: Switching: Switching (ostree): Preparing import: Fetching manifest: failed to invoke method OpenImage: ";
    let digest = format!("sha256:{}", "b".repeat(64));
    for (fault, tail) in [
        (
            Fault::NotFound,
            format!("{prefix}reading manifest {digest} in quay.io/acme/os: manifest unknown"),
        ),
        (
            Fault::Unauthorized,
            format!(
                "{prefix}reading manifest {digest} in quay.io/acme/os: authentication required"
            ),
        ),
        (
            Fault::PullError,
            format!(
                "{prefix}pinging container registry quay.io: Get \"https://quay.io/v2/\": dial tcp quay.io: connect: connection refused"
            ),
        ),
        (
            Fault::NoSpace,
            format!(
                "error: Switching: Switching (ostree): Insufficient free space for {B} (available: 512.0 MB required: 2.1 GB)"
            ),
        ),
    ] {
        let h = host(BootcVersion::Pr);
        h.layout.set_fault(Some(fault)).unwrap();
        let out = bootc(&h, &format!("switch --download-only -- {B}"));
        assert_eq!(
            (out.code, out.stderr),
            (1, format!("{tail}\n")),
            "{fault:?}"
        );
        assert_eq!(state(&h).staged, None);
    }
}

/// Section 8: the first existing auth file wins, no merging; none: anonymous.
#[test]
fn auth_file_precedence() {
    let h = host(BootcVersion::Pr);
    assert_eq!(h.layout.effective_auth(), None);
    for file in AUTH_FILES.iter().rev() {
        let path = h.layout.root.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{}").unwrap();
        assert_eq!(h.layout.effective_auth(), Some(path), "{file}");
    }
    assert_eq!(h.layout.effective_auth(), Some(h.layout.auth()));
}
