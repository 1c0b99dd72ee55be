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
    assert!(crates.iter().any(|c| c.starts_with("helper ")), "{crates:?}");
    let lines = helper_code_lines(&repo).unwrap();
    assert!(
        lines <= LINE_BUDGET,
        "helper/src has {lines} lines of non-test code (budget {LINE_BUDGET})"
    );
    assert!(lines > 100, "{lines}: counted nothing?");
}
