//! The fake bootc's command line: what clap accepts and refuses for the
//! commands the node agent runs, with clap's texts (usage errors on stderr,
//! exit 2; help on stdout, exit 0), per bootc version. Pure; the contract
//! reference's section 2 is the specification, and the conformance test
//! replays bootc's own rendered usage errors against it.

use super::BootcVersion;

/// `--soft-reboot` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftReboot {
    Required,
    Auto,
}

/// `bootc switch` as parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchArgs {
    pub apply: bool,
    pub soft_reboot: Option<SoftReboot>,
    pub transport: Option<String>,
    pub download_only: bool,
    pub from_downloaded: bool,
    pub target: Option<String>,
}

/// `bootc upgrade` as parsed (v1.12+: the same flags on every version the
/// fake plays, `--tag` from v1.15).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpgradeArgs {
    pub apply: bool,
    pub check: bool,
    pub soft_reboot: Option<SoftReboot>,
    pub download_only: bool,
    pub from_downloaded: bool,
}

/// `bootc status --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusFormat {
    HumanReadable,
    Yaml,
    Json,
}

/// `bootc status` as parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusArgs {
    /// None: YAML when stdout is not a terminal (always, for the fake).
    pub format: Option<StatusFormat>,
    pub format_version: Option<u32>,
    pub booted_only: bool,
}

/// Which help text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelpTopic {
    SwitchLong,
    SwitchShort,
    StatusLong,
    UpgradeLong,
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Help(HelpTopic),
    Version,
    Status(StatusArgs),
    Switch(SwitchArgs),
    Upgrade(UpgradeArgs),
    /// A usage error: clap's text for stderr (exit 2).
    Usage(String),
}

const MORE: &str = "\nFor more information, try '--help'.\n";

fn target_usage(version: BootcVersion, from_downloaded: bool) -> &'static str {
    if version == BootcVersion::V1_16 || !from_downloaded {
        "<TARGET>"
    } else {
        "[TARGET]"
    }
}

fn options_usage(version: BootcVersion) -> &'static str {
    match version {
        BootcVersion::V1_16 => "Usage: bootc switch [OPTIONS] <TARGET>",
        BootcVersion::Pr => "Usage: bootc switch [OPTIONS] [TARGET]",
    }
}

fn unknown_flag(version: BootcVersion, flag: &str) -> Command {
    Command::Usage(format!(
        "error: unexpected argument '{flag}' found\n\n  tip: to pass '{flag}' as a value, use '-- {flag}'\n\n{}\n{MORE}",
        options_usage(version)
    ))
}

fn invalid_value(value: &str, arg: &str, possible: &[&str]) -> Command {
    let tip = possible
        .iter()
        .find(|p| jaro(value, p) > 0.7)
        .map(|p| format!("\n  tip: a similar value exists: '{p}'\n"))
        .unwrap_or_default();
    Command::Usage(format!(
        "error: invalid value '{value}' for '{arg}'\n  [possible values: {}]\n{tip}{MORE}",
        possible.join(", ")
    ))
}

/// Splits `--name=value` or takes the next token as the value.
fn value_of<'a>(
    token: &'a str,
    name: &str,
    rest: &mut std::slice::Iter<'a, String>,
) -> Option<Option<&'a str>> {
    if token == name {
        return Some(rest.next().map(String::as_str));
    }
    token
        .strip_prefix(name)
        .and_then(|t| t.strip_prefix('='))
        .map(Some)
}

/// Parses bootc's arguments (without argv[0]).
pub fn parse(version: BootcVersion, args: &[String]) -> Command {
    match args.first().map(String::as_str) {
        Some("--version" | "-V") => Command::Version,
        Some("switch") => parse_switch(version, &args[1..]),
        Some("upgrade") => parse_upgrade(&args[1..]),
        Some("status") => parse_status(&args[1..]),
        Some(other) => Command::Usage(format!(
            "error: unrecognized subcommand '{other}'\n\nUsage: bootc <COMMAND>\n{MORE}"
        )),
        None => Command::Usage(format!(
            "error: 'bootc' requires a subcommand but one was not provided\n\nUsage: bootc <COMMAND>\n{MORE}"
        )),
    }
}

/// The order in which flags that conflict appeared (clap names the first).
#[derive(Default)]
struct Seen {
    order: Vec<&'static str>,
}

impl Seen {
    fn first_of(&self, a: &'static str, b: &'static str) -> (&'static str, &'static str) {
        let pos = |x| {
            self.order
                .iter()
                .position(|y| *y == x)
                .unwrap_or(usize::MAX)
        };
        if pos(a) <= pos(b) { (a, b) } else { (b, a) }
    }
}

fn parse_switch(version: BootcVersion, args: &[String]) -> Command {
    let mut out = SwitchArgs::default();
    let mut seen = Seen::default();
    let mut it = args.iter();
    let mut positional_only = false;
    while let Some(token) = it.next() {
        let t = token.as_str();
        if positional_only || !t.starts_with('-') || t == "-" {
            if out.target.is_some() {
                return Command::Usage(format!(
                    "error: unexpected argument '{t}' found\n\n{}\n{MORE}",
                    options_usage(version)
                ));
            }
            out.target = Some(t.to_owned());
            seen.order.push("[TARGET]");
            continue;
        }
        match t {
            "--" => positional_only = true,
            "--help" => return Command::Help(HelpTopic::SwitchLong),
            "-h" => return Command::Help(HelpTopic::SwitchShort),
            "--quiet" | "--retain" | "--enforce-container-sigpolicy" => {}
            "--no-signature-verification" | "--mutate-in-place" => {}
            "--experimental-unified-storage" => {}
            "--apply" => {
                out.apply = true;
                seen.order.push("--apply");
            }
            "--download-only" if version == BootcVersion::Pr => {
                out.download_only = true;
                seen.order.push("--download-only");
            }
            "--from-downloaded" if version == BootcVersion::Pr => {
                out.from_downloaded = true;
                seen.order.push("--from-downloaded");
            }
            _ => {
                if let Some(v) = value_of(t, "--soft-reboot", &mut it) {
                    out.soft_reboot = match soft_reboot_value(v) {
                        Ok(mode) => Some(mode),
                        Err(usage) => return usage,
                    };
                } else if let Some(v) = value_of(t, "--transport", &mut it) {
                    out.transport = v.map(str::to_owned);
                } else if value_of(t, "--progress-fd", &mut it).is_some() {
                } else {
                    return unknown_flag(version, t);
                }
            }
        }
    }
    switch_conflicts(version, out, &seen)
}

/// clap's checks after parsing: conflicts, then required arguments.
fn switch_conflicts(version: BootcVersion, out: SwitchArgs, seen: &Seen) -> Command {
    let conflict = |a: &'static str, b: &'static str| {
        let (first, second) = seen.first_of(a, b);
        let target = if first == "[TARGET]" {
            String::new()
        } else {
            format!(" {}", target_usage(version, out.from_downloaded))
        };
        Command::Usage(format!(
            "error: the argument '{first}' cannot be used with '{second}'\n\nUsage: bootc switch {first}{target}\n{MORE}"
        ))
    };
    if out.download_only && out.apply {
        return conflict("--download-only", "--apply");
    }
    if out.download_only && out.from_downloaded {
        return conflict("--download-only", "--from-downloaded");
    }
    if out.from_downloaded && out.target.is_some() {
        return conflict("--from-downloaded", "[TARGET]");
    }
    if out.target.is_none() && !out.from_downloaded {
        let used: String = seen.order.iter().map(|f| format!("{f} ")).collect();
        return Command::Usage(format!(
            "error: the following required arguments were not provided:\n  <TARGET>\n\nUsage: bootc switch {used}<TARGET>\n{MORE}"
        ));
    }
    Command::Switch(out)
}

/// `--soft-reboot`'s value, or clap's usage error.
fn soft_reboot_value(v: Option<&str>) -> Result<SoftReboot, Command> {
    const SOFT: &str = "--soft-reboot <SOFT_REBOOT>";
    match v {
        Some("required") => Ok(SoftReboot::Required),
        Some("auto") => Ok(SoftReboot::Auto),
        Some(other) => Err(invalid_value(other, SOFT, &["required", "auto"])),
        None => Err(Command::Usage(format!(
            "error: a value is required for '{SOFT}' but none was supplied\n  [possible values: required, auto]\n{MORE}"
        ))),
    }
}

/// `bootc upgrade` (`cli.rs@v1.16.9:87-137`): its flags and clap's
/// conflicts (`--check` with `--apply`, `--download-only`,
/// `--from-downloaded`, `--soft-reboot`; `--download-only` with `--apply`
/// and `--from-downloaded`), the first one given named in the usage line.
fn parse_upgrade(args: &[String]) -> Command {
    let mut out = UpgradeArgs::default();
    let mut seen = Seen::default();
    let mut it = args.iter();
    while let Some(token) = it.next() {
        let t = token.as_str();
        let flag = match t {
            "--help" | "-h" => return Command::Help(HelpTopic::UpgradeLong),
            "--quiet" => continue,
            "--apply" => &mut out.apply,
            "--check" => &mut out.check,
            "--download-only" => &mut out.download_only,
            "--from-downloaded" => &mut out.from_downloaded,
            _ => {
                if let Some(v) = value_of(t, "--soft-reboot", &mut it) {
                    out.soft_reboot = Some(match soft_reboot_value(v) {
                        Ok(mode) => mode,
                        Err(usage) => return usage,
                    });
                    seen.order.push("--soft-reboot <SOFT_REBOOT>");
                } else if value_of(t, "--tag", &mut it).is_none()
                    && value_of(t, "--progress-fd", &mut it).is_none()
                {
                    return Command::Usage(format!(
                        "error: unexpected argument '{t}' found\n\n  tip: to pass '{t}' as a value, use '-- {t}'\n\nUsage: bootc upgrade [OPTIONS]\n{MORE}"
                    ));
                }
                continue;
            }
        };
        *flag = true;
        seen.order.push(match t {
            "--apply" => "--apply",
            "--check" => "--check",
            "--download-only" => "--download-only",
            _ => "--from-downloaded",
        });
    }
    let pairs = [
        (out.check && out.apply, "--check", "--apply"),
        (out.check && out.download_only, "--check", "--download-only"),
        (
            out.check && out.from_downloaded,
            "--check",
            "--from-downloaded",
        ),
        (
            out.check && out.soft_reboot.is_some(),
            "--check",
            "--soft-reboot <SOFT_REBOOT>",
        ),
        (out.download_only && out.apply, "--download-only", "--apply"),
        (
            out.download_only && out.from_downloaded,
            "--download-only",
            "--from-downloaded",
        ),
    ];
    match pairs.into_iter().find(|(conflict, ..)| *conflict) {
        Some((_, a, b)) => {
            let (first, second) = seen.first_of(a, b);
            Command::Usage(format!(
                "error: the argument '{first}' cannot be used with '{second}'\n\nUsage: bootc upgrade {first}\n{MORE}"
            ))
        }
        None => Command::Upgrade(out),
    }
}

fn parse_status(args: &[String]) -> Command {
    const FORMAT: &str = "--format <FORMAT>";
    let mut out = StatusArgs {
        format: None,
        format_version: None,
        booted_only: false,
    };
    let mut it = args.iter();
    while let Some(token) = it.next() {
        let t = token.as_str();
        match t {
            "--help" => return Command::Help(HelpTopic::StatusLong),
            "--booted" => out.booted_only = true,
            "--json" => out.format = Some(StatusFormat::Json),
            "-v" | "--verbose" => {}
            _ => {
                if let Some(v) = value_of(t, "--format", &mut it) {
                    out.format = Some(match v {
                        Some("humanreadable") => StatusFormat::HumanReadable,
                        Some("yaml") => StatusFormat::Yaml,
                        Some("json") => StatusFormat::Json,
                        Some(other) => {
                            return invalid_value(
                                other,
                                FORMAT,
                                &["humanreadable", "yaml", "json"],
                            );
                        }
                        None => {
                            return Command::Usage(format!(
                                "error: a value is required for '{FORMAT}' but none was supplied\n  [possible values: humanreadable, yaml, json]\n{MORE}"
                            ));
                        }
                    });
                } else if let Some(v) = value_of(t, "--format-version", &mut it) {
                    let v = v.unwrap_or_default();
                    match v.parse::<u32>() {
                        Ok(n) => out.format_version = Some(n),
                        Err(e) => {
                            return Command::Usage(format!(
                                "error: invalid value '{v}' for '--format-version <FORMAT_VERSION>': {e}\n{MORE}"
                            ));
                        }
                    }
                } else {
                    return Command::Usage(format!(
                        "error: unexpected argument '{t}' found\n\nUsage: bootc status [OPTIONS]\n{MORE}"
                    ));
                }
            }
        }
    }
    Command::Status(out)
}

/// Jaro similarity, as clap uses (through strsim) for "a similar value
/// exists" tips (threshold 0.7).
fn jaro(a: &str, b: &str) -> f64 {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let window = (a.len().max(b.len()) / 2).saturating_sub(1);
    let mut b_used = vec![false; b.len()];
    let mut a_matches = Vec::new();
    for (i, ca) in a.iter().enumerate() {
        let lo = i.saturating_sub(window);
        let hi = (i + window + 1).min(b.len());
        if let Some(j) = (lo..hi).find(|&j| !b_used[j] && b[j] == *ca) {
            b_used[j] = true;
            a_matches.push(*ca);
        }
    }
    let m = a_matches.len();
    if m == 0 {
        return 0.0;
    }
    let b_matches: Vec<char> = b
        .iter()
        .zip(&b_used)
        .filter(|(_, u)| **u)
        .map(|(c, _)| *c)
        .collect();
    let transpositions = a_matches
        .iter()
        .zip(&b_matches)
        .filter(|(x, y)| x != y)
        .count()
        / 2;
    let m = m as f64;
    (m / a.len() as f64 + m / b.len() as f64 + (m - transpositions as f64) / m) / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similar_values() {
        assert!(jaro("xml", "yaml") > 0.7);
        assert!(jaro("bogus", "auto") <= 0.7);
        assert!(jaro("bogus", "required") <= 0.7);
    }
}
