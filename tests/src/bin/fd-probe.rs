//! Test only: stands in for `bootc-helper` (the daemon's `--helper`), prints
//! the descriptors it was started with, then executes the real helper
//! beside it with the same arguments (same pid, same descriptors).
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write;
use std::os::unix::process::CommandExt;

fn main() {
    let listing = std::fs::read_dir("/proc/self/fd");
    let mut fds: Vec<i32> = Vec::new();
    if let Ok(entries) = listing {
        for entry in entries.flatten() {
            // The directory stream's own descriptor points back at /proc.
            let own = std::fs::read_link(entry.path())
                .map(|t| t.starts_with("/proc"))
                .unwrap_or(true);
            if let (false, Ok(n)) = (own, entry.file_name().to_string_lossy().parse()) {
                fds.push(n);
            }
        }
    }
    fds.sort_unstable();
    // One write: the daemon logs to the same stderr, and `eprintln!` would
    // write the list piece by piece, letting the daemon's line land inside
    // it (a pipe write of less than PIPE_BUF bytes is atomic).
    let line = format!("fd-probe: fds={fds:?}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    let helper = tests::fake_host::bin("bootc-helper");
    let err = std::process::Command::new(helper)
        .args(std::env::args_os().skip(1))
        .exec();
    #[allow(clippy::print_stderr)]
    {
        eprintln!("fd-probe: exec failed: {err}");
    }
    std::process::exit(1);
}
