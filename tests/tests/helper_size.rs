#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The privileged helper stays small enough to audit: at most 60 linked
//! crates and 1,000 lines of non-test code (the benchmark prints both).

use tests::helper_size::{CRATE_BUDGET, LINE_BUDGET, helper_code_lines, linked_crates};

#[test]
fn helper_stays_within_its_crate_and_line_budgets() {
    let repo = tests::repo_root();
    let crates = linked_crates(&repo).unwrap();
    assert!(
        crates.len() <= CRATE_BUDGET,
        "the helper links {} crates (budget {CRATE_BUDGET}):\n{}",
        crates.len(),
        crates.join("\n")
    );
    // Not an empty or truncated listing.
    assert!(
        crates.iter().any(|c| c.starts_with("helper ")),
        "{crates:?}"
    );
    let lines = helper_code_lines(&repo).unwrap();
    assert!(
        lines <= LINE_BUDGET,
        "helper/src has {lines} lines of non-test code (budget {LINE_BUDGET})"
    );
    assert!(lines > 100, "{lines}: counted nothing?");
}

/// In CI (`./dev test`), every test that starts the helper runs the binary
/// built on its own (`cargo build -p helper` into its own target
/// directory), not the workspace build.
#[test]
fn integration_tests_run_the_shipped_helper() {
    use tests::fake_host::{SHIPPED_HELPER_ENV, bin, target_dir};
    let Some(shipped) = std::env::var_os(SHIPPED_HELPER_ENV) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the tests through ./dev test, which sets {SHIPPED_HELPER_ENV}"
        );
        eprintln!("SKIPPED: {SHIPPED_HELPER_ENV} unset (not run through ./dev test)");
        return;
    };
    let helper = bin("bootc-helper");
    assert_eq!(helper, std::path::PathBuf::from(&shipped));
    assert!(helper.is_file(), "{}", helper.display());
    assert!(
        !helper.starts_with(target_dir()),
        "{} is the workspace build",
        helper.display()
    );
}
