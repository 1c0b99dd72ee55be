//! The command line, shaped like kubectl's: its connection flags
//! (`--kubeconfig`, `--context`) on every command, `-n` where an object of
//! the operator's namespace is involved, `-o json|yaml` where a command has
//! a document to print; and the exit status each error gives. Pure:
//! parsing and decisions; `main.rs` connects, reads and prints.
//!
//! kubectl passes none of its own flags to a plugin: `kubectl bootc
//! --context prod status` hands `--context prod status` to this binary,
//! which reads them itself.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand, ValueEnum};
use kube::config::KubeConfigOptions;

use crate::lookup::Missing;

const EXIT_STATUS: &str = "\
Exit status:
  0  done
  1  the cluster could not be reached, read or written; or a pool or node
     that does not exist, or that bootc-operator does not manage
  2  refused (e.g. `retry` of a node that awaits none), or a usage error";

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-bootc",
    bin_name = "kubectl bootc",
    version,
    about = "bootc-operator rollouts: status, pause/resume, refresh, retry, history, why, plan",
    long_about = "bootc-operator rollouts at a glance. Connects like kubectl: --kubeconfig, \
                  else KUBECONFIG, else ~/.kube/config, with --context or the current \
                  context; installed on PATH it runs as `kubectl bootc`.",
    after_long_help = EXIT_STATUS
)]
pub struct Cli {
    #[command(flatten)]
    pub cluster: ClusterFlags,
    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's connection flags, accepted before or after the command.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterFlags {
    /// The kubeconfig file (default: KUBECONFIG, else ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH", display_order = 100)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current-context).
    #[arg(long, global = true, value_name = "NAME", display_order = 101)]
    pub context: Option<String>,
}

/// `-o`: a document instead of the text (the structure: [`crate::output`]).
#[derive(Args, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputFlag {
    /// Print a document (json or yaml) instead of the text.
    #[arg(short = 'o', long = "output", value_enum, value_name = "FORMAT")]
    pub output: Option<Format>,
}

/// The documents' formats.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

impl Format {
    /// As `-o` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Yaml => "yaml",
        }
    }
}

#[derive(Subcommand, Debug, PartialEq, Eq)]
pub enum Command {
    /// The rollout at a glance: nodes, phases, slots, what blocks progress.
    #[command(after_help = "\
Examples:
  kubectl bootc status
  kubectl bootc status workers
  kubectl bootc status workers -o yaml
  kubectl bootc status --context prod --kubeconfig ~/.kube/prod.yaml -o json")]
    Status {
        /// One pool (default: every pool).
        pool: Option<String>,
        #[command(flatten)]
        output: OutputFlag,
    },
    /// Hand out no new reboot slot (spec.rollout.paused: true).
    #[command(after_help = "\
Examples:
  kubectl bootc pause workers
  kubectl bootc pause workers --context prod")]
    Pause {
        /// The pool.
        pool: String,
    },
    /// Hand out reboot slots again (spec.rollout.paused: false); with
    /// --all, turn the fleet's switch off (`stop --all`).
    #[command(after_help = "\
Examples:
  kubectl bootc resume workers
  kubectl bootc resume --all")]
    Resume {
        /// The pool.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        pool: Option<String>,
        /// Every pool: remove the fleet's switch (bootc.dev/stop on the
        /// operator's namespace). Pools paused one by one stay paused.
        #[arg(long)]
        all: bool,
        /// The operator's namespace, which carries the fleet's switch.
        #[arg(short = 'n', long, value_name = "NAMESPACE", default_value = api::labels::OPERATOR_NAMESPACE)]
        namespace: String,
    },
    /// Stop every pool at once: no pool hands out a new reboot slot until
    /// `resume --all` (the annotation bootc.dev/stop on the operator's
    /// namespace). Nodes already in slots finish, unless
    /// --before-approval; staging goes on.
    #[command(after_help = "\
Examples:
  kubectl bootc stop --all --reason \"incident 4521\"
  kubectl bootc stop --all --before-approval   # nodes in slots wait cordoned
  kubectl bootc resume --all")]
    Stop {
        /// Every pool (required: one pool is `pause POOL`).
        #[arg(long, required = true)]
        all: bool,
        /// Why, shown on every pool (default: who stopped it, when).
        #[arg(long)]
        reason: Option<String>,
        /// Nodes in reboot slots are not approved to boot either: they
        /// wait cordoned until `resume --all` (those already approved
        /// finish).
        #[arg(long)]
        before_approval: bool,
        /// The operator's namespace, which carries the fleet's switch.
        #[arg(short = 'n', long, value_name = "NAMESPACE", default_value = api::labels::OPERATOR_NAMESPACE)]
        namespace: String,
    },
    /// Resolve the pool's tag now, not at its next interval (the
    /// controller honours one request every 10 s).
    #[command(after_help = "\
Examples:
  kubectl bootc refresh workers   # after pushing a new image to the tag it follows")]
    Refresh {
        /// The pool.
        pool: String,
    },
    /// Try again a node whose reboot failed (approved to boot and
    /// Degraded), or a pool's image that failed its health gate.
    #[command(after_help = "\
Examples:
  kubectl bootc retry node-3      # a node approved to boot, Degraded
  kubectl bootc retry workers     # the pool's image that failed its health gate")]
    Retry {
        /// A node, or a pool.
        node: String,
    },
    /// The pool's rollouts (its status and Events), or a node's updates.
    #[command(after_help = "\
Examples:
  kubectl bootc history workers
  kubectl bootc history node-3
  kubectl bootc history workers -o json")]
    History {
        /// A pool, or a node.
        pool: String,
        #[command(flatten)]
        output: OutputFlag,
    },
    /// Why a node is not updating.
    #[command(after_help = "\
Examples:
  kubectl bootc why node-3
  kubectl bootc why node-3 --context prod")]
    Why {
        /// The node.
        node: String,
    },
    /// The rollout ahead, wave by wave, by the controller's planner
    /// (writes nothing).
    #[command(after_help = "\
Examples:
  kubectl bootc plan workers
  kubectl bootc plan workers --image quay.io/acme/os@sha256:<digest>
  kubectl bootc plan workers -n my-operator -o yaml")]
    Plan {
        /// The pool.
        pool: String,
        /// Preview this image (`repository@sha256:...`) instead of the
        /// pool's target.
        #[arg(long)]
        image: Option<String>,
        /// The operator's namespace, where the pool's spec.pullSecretRef
        /// must point.
        #[arg(short = 'n', long, value_name = "NAMESPACE", default_value = api::labels::OPERATOR_NAMESPACE)]
        namespace: String,
        #[command(flatten)]
        output: OutputFlag,
    },
}

/// Where the connection's settings come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source<'a> {
    /// No flag: as kubectl does (KUBECONFIG, ~/.kube/config), and in a pod
    /// its service account.
    Inferred,
    /// `--context` of KUBECONFIG (or ~/.kube/config).
    Context(&'a str),
    /// `--kubeconfig`, with `--context` or its current context.
    File {
        path: &'a Path,
        context: Option<&'a str>,
    },
}

impl ClusterFlags {
    pub fn source(&self) -> Source<'_> {
        match (&self.kubeconfig, &self.context) {
            (Some(path), context) => Source::File {
                path,
                context: context.as_deref(),
            },
            (None, Some(context)) => Source::Context(context),
            (None, None) => Source::Inferred,
        }
    }

    /// kube's options for the kubeconfig (the context to use).
    pub fn options(&self) -> KubeConfigOptions {
        KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        }
    }
}

impl Source<'_> {
    /// The flags and values the settings came from, as errors name them.
    pub fn describe(&self) -> String {
        match self {
            Source::Inferred => "KUBECONFIG (or ~/.kube/config)".to_owned(),
            Source::Context(context) => {
                format!("--context {context:?} (of KUBECONFIG or ~/.kube/config)")
            }
            Source::File {
                path,
                context: None,
            } => format!("--kubeconfig {}", path.display()),
            Source::File {
                path,
                context: Some(context),
            } => format!("--kubeconfig {} --context {context:?}", path.display()),
        }
    }
}

/// What a command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("connecting to the cluster with {flags}: {source}")]
    Connect {
        flags: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Missing(#[from] Missing),
    #[error("{0}")]
    Refused(String),
    #[error("-o {format}: {source}", format = .format.as_str())]
    Encode {
        format: Format,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
}

/// The exit status of a failed command (see `--help`): 2 for a refusal,
/// as for a usage error (clap's own); 1 for the rest.
pub fn exit_code(e: &Error) -> u8 {
    match e {
        Error::Refused(_) => 2,
        Error::Connect { .. }
        | Error::Api { .. }
        | Error::Missing(_)
        | Error::Encode { .. }
        | Error::Output(_) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, ErrorKind> {
        Cli::try_parse_from(std::iter::once("kubectl-bootc").chain(args.iter().copied()))
            .map_err(|e| e.kind())
    }

    fn flags(kubeconfig: Option<&str>, context: Option<&str>) -> ClusterFlags {
        ClusterFlags {
            kubeconfig: kubeconfig.map(PathBuf::from),
            context: context.map(str::to_owned),
        }
    }

    fn status(pool: Option<&str>, output: Option<Format>) -> Command {
        Command::Status {
            pool: pool.map(str::to_owned),
            output: OutputFlag { output },
        }
    }

    #[test]
    fn kubectl_flags_parse_on_every_command_before_or_after_it() {
        let json = Some(Format::Json);
        #[rustfmt::skip]
        let rows: Vec<(&[&str], ClusterFlags, Command)> = vec![
            (&["status"], flags(None, None), status(None, None)),
            (&["status", "--context", "foo"], flags(None, Some("foo")), status(None, None)),
            (&["--context", "foo", "status"], flags(None, Some("foo")), status(None, None)),
            (&["--kubeconfig", "/k", "status", "w", "-o", "json"], flags(Some("/k"), None), status(Some("w"), json)),
            (&["status", "w", "--output=yaml", "--kubeconfig=/k", "--context=c"], flags(Some("/k"), Some("c")), status(Some("w"), Some(Format::Yaml))),
            (&["pause", "w", "--context", "c"], flags(None, Some("c")), Command::Pause { pool: "w".into() }),
            (&["resume", "--kubeconfig", "/k", "w"], flags(Some("/k"), None), Command::Resume { pool: Some("w".into()), all: false, namespace: api::labels::OPERATOR_NAMESPACE.into() }),
            (&["resume", "--all"], flags(None, None), Command::Resume { pool: None, all: true, namespace: api::labels::OPERATOR_NAMESPACE.into() }),
            (&["stop", "--all", "--reason", "incident", "-n", "ops"], flags(None, None), Command::Stop { all: true, reason: Some("incident".into()), before_approval: false, namespace: "ops".into() }),
            (&["stop", "--all", "--before-approval"], flags(None, None), Command::Stop { all: true, reason: None, before_approval: true, namespace: api::labels::OPERATOR_NAMESPACE.into() }),
            (&["refresh", "w", "--context", "c"], flags(None, Some("c")), Command::Refresh { pool: "w".into() }),
            (&["retry", "n1", "--context", "c"], flags(None, Some("c")), Command::Retry { node: "n1".into() }),
            (&["why", "n1", "--kubeconfig", "/k", "--context", "c"], flags(Some("/k"), Some("c")), Command::Why { node: "n1".into() }),
            (&["history", "w", "-o", "yaml"], flags(None, None), Command::History { pool: "w".into(), output: OutputFlag { output: Some(Format::Yaml) } }),
            (&["plan", "w"], flags(None, None), Command::Plan { pool: "w".into(), image: None, namespace: api::labels::OPERATOR_NAMESPACE.into(), output: OutputFlag::default() }),
            (&["plan", "w", "-n", "ops", "-o", "json", "--context", "c"], flags(None, Some("c")), Command::Plan { pool: "w".into(), image: None, namespace: "ops".into(), output: OutputFlag { output: json } }),
            (&["plan", "w", "--namespace", "ops", "--image", "r@sha256:1"], flags(None, None), Command::Plan { pool: "w".into(), image: Some("r@sha256:1".into()), namespace: "ops".into(), output: OutputFlag::default() }),
        ];
        for (args, want_flags, want_command) in rows {
            let cli = parse(args).unwrap_or_else(|e| panic!("{args:?}: {e:?}"));
            assert_eq!(cli.cluster, want_flags, "{args:?}");
            assert_eq!(cli.command, want_command, "{args:?}");
        }
    }

    #[test]
    fn flags_where_they_do_not_apply_are_usage_errors() {
        #[rustfmt::skip]
        let rows: Vec<(&[&str], ErrorKind)> = vec![
            (&["status", "-o", "wide"], ErrorKind::InvalidValue),
            (&["status", "-o"], ErrorKind::InvalidValue),
            (&["why", "n1", "-o", "json"], ErrorKind::UnknownArgument),
            (&["pause", "w", "-o", "json"], ErrorKind::UnknownArgument),
            (&["status", "-n", "ops"], ErrorKind::UnknownArgument),
            (&["why", "n1", "--namespace", "ops"], ErrorKind::UnknownArgument),
            (&["status", "--context"], ErrorKind::InvalidValue),
            (&["why"], ErrorKind::MissingRequiredArgument),
            (&["--cluster", "c", "status"], ErrorKind::UnknownArgument),
        ];
        for (args, want) in rows {
            assert_eq!(parse(args).err(), Some(want), "{args:?}");
        }
    }

    #[test]
    fn the_settings_come_from_the_flags_else_as_kubectl_finds_them() {
        #[rustfmt::skip]
        let rows = [
            (flags(None, None), Source::Inferred, "KUBECONFIG (or ~/.kube/config)"),
            (flags(None, Some("c")), Source::Context("c"), "--context \"c\" (of KUBECONFIG or ~/.kube/config)"),
            (flags(Some("/k"), None), Source::File { path: Path::new("/k"), context: None }, "--kubeconfig /k"),
            (flags(Some("/k"), Some("c")), Source::File { path: Path::new("/k"), context: Some("c") }, "--kubeconfig /k --context \"c\""),
        ];
        for (flags, source, described) in rows {
            assert_eq!(flags.source(), source);
            assert_eq!(flags.source().describe(), described);
            assert_eq!(flags.options().context, flags.context);
        }
    }

    #[test]
    fn each_error_has_its_exit_status() {
        let missing = Missing::NotFound {
            kind: "BootcNodePool".into(),
            name: "nosuch".into(),
        };
        let io = || std::io::Error::other("closed");
        let rows: Vec<(Error, u8)> = vec![
            (Error::Refused("no".into()), 2),
            (Error::Missing(missing), 1),
            (
                Error::Connect {
                    flags: "--context c".into(),
                    source: Box::new(io()),
                },
                1,
            ),
            (
                Error::Encode {
                    format: Format::Yaml,
                    source: Box::new(io()),
                },
                1,
            ),
            (Error::Output(io()), 1),
        ];
        for (e, code) in rows {
            assert_eq!(exit_code(&e), code, "{e}");
        }
        // A usage error exits 2, as a refusal does.
        let usage = Cli::try_parse_from(["kubectl-bootc", "status", "--context"]);
        assert_eq!(usage.err().map(|e| e.exit_code()), Some(2));
    }

    #[test]
    fn errors_name_the_flags_and_values_they_come_from() {
        let e = Error::Connect {
            flags: flags(Some("/k"), Some("prod")).source().describe(),
            source: Box::new(std::io::Error::other("no such context")),
        };
        assert_eq!(
            e.to_string(),
            "connecting to the cluster with --kubeconfig /k --context \"prod\": no such context"
        );
        let e = Error::Encode {
            format: Format::Yaml,
            source: Box::new(std::io::Error::other("bad")),
        };
        assert_eq!(e.to_string(), "-o yaml: bad");
    }

    #[test]
    fn every_command_has_examples_in_its_help() {
        let mut cli = Cli::command();
        cli.build();
        for sub in cli.get_subcommands_mut().filter(|s| s.get_name() != "help") {
            let name = sub.get_name().to_owned();
            let help = sub.render_help().to_string();
            assert!(
                help.contains(&format!("Examples:\n  kubectl bootc {name}")),
                "{name}: {help}"
            );
            for flag in ["--kubeconfig <PATH>", "--context <NAME>"] {
                assert!(help.contains(flag), "{name} lacks {flag}: {help}");
            }
        }
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit status:"), "{help}");
    }
}
