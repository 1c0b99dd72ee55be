//! `bootc-controller`: rolls bootc images across the nodes of each
//! BootcNodePool. Connects with `KUBECONFIG` (or the in-cluster config);
//! its flags are `controller::cli`'s.

fn main() -> std::process::ExitCode {
    controller::cli::main(std::env::args_os(), None)
}
