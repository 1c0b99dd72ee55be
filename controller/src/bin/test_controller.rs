//! `bootc-controller-test`: the controller for tests, built only with the
//! `test-support` feature (the controller's own tests turn it on; no
//! shipped build does). It is `bootc-controller` with one more flag,
//! `--no-registry`: digest references are taken unchecked and tags are
//! refused, for tests whose images exist in no registry.

use std::ffi::OsString;

fn main() -> std::process::ExitCode {
    let no_registry = OsString::from("--no-registry");
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let before = args.len();
    args.retain(|a| *a != no_registry);
    let resolver: Option<std::sync::Arc<dyn controller::target::Resolve>> =
        (args.len() < before).then(|| std::sync::Arc::new(controller::target::DigestOnly) as _);
    controller::cli::main(args, resolver)
}
