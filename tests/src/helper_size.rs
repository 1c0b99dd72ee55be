//! What the privileged helper is made of, against the budgets of the audit
//! (60 linked crates, 1,000 lines of non-test code): printed by the
//! benchmark (`sizes`) and enforced by `tests/tests/helper_size.rs`.

use std::path::Path;
use std::process::Command;

/// Most crates linked into `bootc-helper` (the workspace's own included).
pub const CRATE_BUDGET: usize = 60;
/// Most non-test code lines in `helper/src`.
pub const LINE_BUDGET: usize = 1000;

/// The distinct crates (`name vX.Y.Z`) linked into the helper: its normal
/// dependency tree without proc-macros and what only they use (those run in
/// the compiler, not in the root process).
pub fn linked_crates(repo: &Path) -> anyhow::Result<Vec<String>> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "tree",
            "--locked",
            "-p",
            "helper",
            "-e",
            "normal,no-proc-macro",
        ])
        .args(["--prefix", "none"])
        .current_dir(repo)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut crates: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some(format!("{} {}", words.next()?, words.next()?))
        })
        .collect();
    crates.sort();
    crates.dedup();
    Ok(crates)
}

/// Lines of `source` before its `#[cfg(test)]` module that are neither
/// blank nor comments (`//`, `///`, `//!`).
pub fn code_lines(source: &str) -> usize {
    source
        .lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

/// [`code_lines`] over every `.rs` file of `helper/src`.
pub fn helper_code_lines(repo: &Path) -> anyhow::Result<usize> {
    let mut total = 0;
    for entry in std::fs::read_dir(repo.join("helper/src"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "rs") {
            total += code_lines(&std::fs::read_to_string(&path)?);
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_code_before_the_tests_only() {
        let src = "//! doc\nuse a;\n\n/// f\nfn f() {\n    // c\n    g();\n}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
        assert_eq!(code_lines(src), 4);
    }
}
