//! The `sizes` section: release binary sizes, the helper's crates and lines,
//! the operator image's size.

use std::path::Path;

use anyhow::Result;

use crate::report::{Report, mib, row};

pub(crate) fn sizes(report: &mut Report, release_dir: &Path) {
    use tests::helper_size::{CRATE_BUDGET, LINE_BUDGET, helper_code_lines, linked_crates};
    let repo = tests::repo_root();
    match linked_crates(&repo) {
        Ok(crates) => report.push(row(
            "bootc-helper: linked crates (workspace's included)",
            crates.len().to_string(),
            &format!("<= {CRATE_BUDGET}"),
            Some(crates.len() <= CRATE_BUDGET),
        )),
        Err(e) => report.notes.push(format!("helper crates: {e}")),
    }
    match helper_code_lines(&repo) {
        Ok(lines) => report.push(row(
            "bootc-helper: non-test code lines (helper/src)",
            lines.to_string(),
            &format!("<= {LINE_BUDGET}"),
            Some(lines <= LINE_BUDGET),
        )),
        Err(e) => report.notes.push(format!("helper lines: {e}")),
    }
    for name in ["bootc-controller", "bootc-daemon", "bootc-helper"] {
        let path = release_dir.join(name);
        match std::fs::metadata(&path) {
            Ok(m) => report.push(row(
                format!("release binary size: {name}"),
                format!("{:.1} MiB", m.len() as f64 / (1024.0 * 1024.0)),
                "",
                None,
            )),
            Err(_) => {
                report.push(row(
                    format!("release binary size: {name}"),
                    "not built",
                    "",
                    None,
                ));
                report.notes.push(format!(
                    "{} missing: build with `cargo build --release`",
                    path.display()
                ));
            }
        }
    }
}

/// The operator's image built from the release binaries (what `./dev image`
/// builds): its size compressed (what a node pulls) and unpacked.
pub(crate) fn image_size(report: &mut Report, release_dir: &Path) {
    let measured = (|| -> Result<(u64, u64)> {
        let dir = tempfile::tempdir()?;
        let layout = dir.path().join("oci");
        let digest = tests::image::build(release_dir, &layout, "bench", 0)?;
        tests::image::sizes(&layout, "bench", &digest)
    })();
    let figure = |what| format!("operator image size, {what} (./dev image)");
    match measured {
        Ok((compressed, unpacked)) => {
            report.push(row(figure("compressed"), mib(compressed / 1024), "", None));
            report.push(row(figure("unpacked"), mib(unpacked / 1024), "", None));
        }
        Err(error) => {
            report.push(row(figure("compressed"), "not built", "", None));
            report.notes.push(format!("operator image: {error:#}"));
        }
    }
}
