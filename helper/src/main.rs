//! `bootc-helper`: started by bootc-daemon with a socket as fd 3. See lib.rs.
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use helper::{Args, SOCKET_FD, service::Engine};
use std::process::ExitCode;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "bootc-helper exiting");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args = Args::parse(std::env::args().skip(1))?;
    // Die with the daemon. Set first, then check the parent: if the daemon
    // died before the prctl, the parent is already someone else.
    // The kernel refuses this signal once the daemon has dropped to its
    // uid (the dying parent may not signal a root process): it covers the
    // daemon's start-up only. The pidfd below covers its whole life.
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
    // It holds pull-secret bytes: no core dump, no /proc access by others.
    nix::sys::prctl::set_dumpable(false)?;
    check_parent(args.parent_pid)?;
    let socket = helper::sys::inherited_socket(SOCKET_FD)?;
    // A socketpair's peer credentials are those of the process that made
    // it: that must be the daemon.
    let peer = nix::sys::socket::getsockopt(&socket, nix::sys::socket::sockopt::PeerCredentials)?;
    let (peer, daemon) = (peer.pid(), args.parent_pid);
    if peer != daemon {
        let made = format!("the socket on fd {SOCKET_FD} was made by pid {peer}");
        return Err(format!("{made}, not the daemon ({daemon})").into());
    }
    // Opened after fd 3 is adopted (it would take that number otherwise),
    // then the parent checked again: if it is still the daemon, the pidfd
    // is the daemon's.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let daemon = {
        let _runtime = rt.enter();
        helper::sys::watch_exit(args.parent_pid)?
    };
    check_parent(args.parent_pid)?;
    if args.policy.allowed_repositories.is_empty() {
        tracing::warn!("no --allowed-repository: Stage accepts an image from any repository");
    }
    tracing::info!(host_pid = args.host_pid, policy = ?args.policy, "bootc-helper serving on fd 3");
    // Either way the daemon is gone (it never closes the connection while
    // it lives), so the helper's work is over. A broken connection, or an
    // HTTP/2 protocol error that closed it, is an error exit.
    rt.block_on(async move {
        tokio::select! {
            served = helper::server::serve(socket, Engine::new(args)) => {
                served?;
                tracing::info!("daemon closed the connection; exiting");
            }
            // Readable once the daemon has exited, even if its end of the
            // socket lives on somewhere.
            _ = daemon.readable() => tracing::info!("the daemon exited; exiting"),
        }
        Ok(())
    })
}

/// The helper's parent must be the daemon that started it.
fn check_parent(daemon: i32) -> Result<(), String> {
    let parent = nix::unistd::getppid().as_raw();
    let refusal = || format!("parent is pid {parent}, not the daemon ({daemon}); exiting");
    (parent == daemon).then_some(()).ok_or_else(refusal)
}
