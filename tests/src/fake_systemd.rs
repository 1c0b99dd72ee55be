//! The fake host's systemd, as far as the helper uses it: `systemd-run`
//! starting a transient service (`--unit`, `--collect`, `--wait`, `--quiet`,
//! `--pipe`, `--service-type=`, `--property=StandardOutput=/StandardError=`,
//! `--property=IOWeight=/CPUWeight=` in systemd's range, recorded), and
//! `systemctl is-active` / `stop` / `reset-failed` on it, and `systemctl show
//! --property=Id,UnitFileState,ActiveState` of the host's own (installed)
//! units, the automatic updaters among them. A unit's main
//! process runs detached from whoever started it (its own process group,
//! under a "unit runner" that is not a child of the helper), so it survives
//! the helper, the daemon and `systemd-run` itself, as on a real host; a
//! reboot of the fake host (or its end) kills every unit.
//!
//! ```text
//! <dir>/units/<name>.json        the loaded units (state, main pid, invocation id)
//! <dir>/results/<invocation>.json how an invocation ended (for `systemd-run --wait`)
//! <dir>/history.jsonl            one line per finished or killed invocation
//! <dir>/unit-files/<name>         an installed unit's UnitFileState (`enabled`,
//!                                 `disabled`, `masked`...); absent: no such unit
//! ```
//!
//! An installed unit is `active` exactly when its file state is `enabled`
//! or `linked` (a timer armed since boot), else `inactive`.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use crate::fake_bootc::{Layout, append_jsonl};

/// systemd's default PATH for services (what a unit's process gets).
pub const UNIT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A loaded unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    pub name: String,
    /// `active`, or `failed` (kept until `reset-failed` without `--collect`).
    pub state: String,
    pub invocation_id: String,
    pub main_pid: i32,
    /// The process group leader (the unit runner).
    pub runner_pid: i32,
    pub argv: Vec<String>,
    pub collect: bool,
    /// The resource properties it was started with (`IOWeight=50`...).
    #[serde(default)]
    pub properties: Vec<String>,
}

/// How an invocation ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitResult {
    pub name: String,
    pub invocation_id: String,
    /// systemd's `Result`: `success`, `exit-code`, `signal`, `resources`.
    pub result: String,
    pub exit_status: i32,
    pub argv: Vec<String>,
    /// As [`Unit::properties`].
    #[serde(default)]
    pub properties: Vec<String>,
    pub started_micros: u64,
    pub finished_micros: u64,
}

/// The fake systemd of one fake host.
#[derive(Debug, Clone)]
pub struct FakeSystemd {
    pub dir: PathBuf,
}

fn micros() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn random_id() -> String {
    crate::fake_bootc::new_boot_id().replace('-', "")
}

impl FakeSystemd {
    pub fn new(dir: PathBuf) -> FakeSystemd {
        FakeSystemd { dir }
    }

    fn unit_path(&self, name: &str) -> PathBuf {
        self.dir.join("units").join(format!("{name}.json"))
    }

    fn result_path(&self, invocation: &str) -> PathBuf {
        self.dir.join("results").join(format!("{invocation}.json"))
    }

    /// The loaded unit `name`, if any.
    pub fn unit(&self, name: &str) -> Option<Unit> {
        let bytes = std::fs::read(self.unit_path(name)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Every loaded unit.
    pub fn units(&self) -> Vec<Unit> {
        std::fs::read_dir(self.dir.join("units"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
            .collect()
    }

    /// Every finished (or killed) invocation so far, in order.
    pub fn history(&self) -> Vec<UnitResult> {
        std::fs::read_to_string(self.dir.join("history.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn write_unit(&self, unit: &Unit) -> std::io::Result<()> {
        std::fs::create_dir_all(self.dir.join("units"))?;
        let tmp = self.dir.join("units").join(format!(".{}.tmp", unit.name));
        std::fs::write(
            &tmp,
            serde_json::to_vec(unit).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(tmp, self.unit_path(&unit.name))
    }

    fn unit_file_path(&self, name: &str) -> PathBuf {
        self.dir.join("unit-files").join(name)
    }

    /// Installs unit `name` with this UnitFileState (`enabled`, `masked`...),
    /// as the host's OS image would have it.
    pub fn set_unit_file(&self, name: &str, state: &str) -> std::io::Result<()> {
        std::fs::create_dir_all(self.dir.join("unit-files"))?;
        std::fs::write(self.unit_file_path(name), state)
    }

    /// The UnitFileState of an installed unit (None: not installed).
    pub fn unit_file(&self, name: &str) -> Option<String> {
        let state = std::fs::read_to_string(self.unit_file_path(name)).ok()?;
        Some(state.trim().to_owned())
    }

    /// `systemctl show` of `name`: the properties asked for, in that order.
    fn show(&self, name: &str, properties: &[&str]) -> String {
        let file = self.unit_file(name).unwrap_or_default();
        let active = match file.as_str() {
            "enabled" | "enabled-runtime" | "linked" => "active",
            _ => "inactive",
        };
        let mut out = String::new();
        for p in properties {
            let value = match *p {
                "Id" => name,
                "UnitFileState" => &file,
                "ActiveState" => active,
                "LoadState" if file.is_empty() => "not-found",
                "LoadState" if file == "masked" => "masked",
                "LoadState" => "loaded",
                _ => "",
            };
            out.push_str(&format!("{p}={value}\n"));
        }
        out
    }

    fn remove_unit(&self, name: &str) {
        let _ = std::fs::remove_file(self.unit_path(name));
    }

    fn finish(&self, result: &UnitResult) -> std::io::Result<()> {
        std::fs::create_dir_all(self.dir.join("results"))?;
        let path = self.result_path(&result.invocation_id);
        let tmp = path.with_extension("tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec(result).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(tmp, path)?;
        append_jsonl(&self.dir.join("history.jsonl"), result)
    }

    fn kill(unit: &Unit) {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        if unit.runner_pid > 1 {
            let _ = killpg(Pid::from_raw(unit.runner_pid), Signal::SIGKILL);
        }
    }

    /// `systemctl stop <name>`: kills the unit's processes and unloads it.
    pub fn stop(&self, name: &str) -> std::io::Result<()> {
        if let Some(unit) = self.unit(name) {
            Self::kill(&unit);
            self.finish(&UnitResult {
                name: unit.name.clone(),
                invocation_id: unit.invocation_id.clone(),
                result: "signal".into(),
                exit_status: 9,
                argv: unit.argv.clone(),
                properties: unit.properties.clone(),
                started_micros: 0,
                finished_micros: micros(),
            })?;
            self.remove_unit(name);
        }
        Ok(())
    }

    /// The machine goes down: every unit's processes die and systemd's
    /// state is gone (nothing is recorded as finished: nobody is left to see it).
    pub fn stop_all(&self) -> std::io::Result<()> {
        let units = self.units();
        for unit in &units {
            self.remove_unit(&unit.name);
            // For the tests' eyes only (no result for `systemd-run --wait`).
            append_jsonl(
                &self.dir.join("history.jsonl"),
                &UnitResult {
                    name: unit.name.clone(),
                    invocation_id: unit.invocation_id.clone(),
                    result: "machine-down".into(),
                    exit_status: 9,
                    argv: unit.argv.clone(),
                    properties: unit.properties.clone(),
                    started_micros: 0,
                    finished_micros: micros(),
                },
            )?;
        }
        // Last: the caller may be one of these units' processes.
        for unit in &units {
            Self::kill(unit);
        }
        Ok(())
    }

    /// The unit an invocation id belongs to, among `history` and the units
    /// loaded now.
    pub fn unit_of_invocation(&self, id: &str, history: &[UnitResult]) -> Option<String> {
        history
            .iter()
            .find(|r| r.invocation_id == id)
            .map(|r| r.name.clone())
            .or_else(|| {
                self.units()
                    .into_iter()
                    .find(|u| u.invocation_id == id)
                    .map(|u| u.name)
            })
    }
}

/// `fake-bootc --fake-root <root> --as <tool> <args>`.
pub fn main_as(layout: &Layout, tool: &str, args: &[String]) -> i32 {
    let systemd = layout.systemd();
    let result = match tool {
        "systemd-run" => systemd_run(layout, &systemd, args),
        "systemctl" => systemctl(&systemd, args),
        "unit-runner" => unit_runner(&systemd, args),
        other => Err(format!("fake systemd: unknown tool {other}")),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "{message}");
            1
        }
    }
}

/// What `systemd-run` was asked for.
#[derive(Debug, Default, PartialEq, Eq)]
struct RunArgs {
    unit: Option<String>,
    collect: bool,
    wait: bool,
    quiet: bool,
    /// `--pipe`: the unit's stdio are systemd-run's own.
    pipe: bool,
    /// `--service-type=exec`: see [`job_failed`].
    exec: bool,
    stdout: Option<String>,
    stderr: Option<String>,
    /// `IOWeight=` / `CPUWeight=` assignments, as given.
    properties: Vec<String>,
    command: Vec<String>,
}

fn parse_run(args: &[String]) -> Result<RunArgs, String> {
    let mut out = RunArgs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let a = a.as_str();
        if a == "--" {
            out.command = it.cloned().collect();
            break;
        }
        if !a.starts_with('-') {
            out.command = std::iter::once(a.to_owned()).chain(it.cloned()).collect();
            break;
        }
        if let Some(u) = a.strip_prefix("--unit=") {
            out.unit = Some(u.to_owned());
        } else if let Some(p) = a.strip_prefix("--property=") {
            property(&mut out, p)?;
        } else if let Some(t) = a.strip_prefix("--service-type=") {
            if !["simple", "exec", "oneshot"].contains(&t) {
                return Err(format!("Failed to parse service type: {t}"));
            }
            out.exec = t == "exec";
        } else if a.starts_with("--description=") {
        } else {
            match a {
                "--collect" | "-G" => out.collect = true,
                "--wait" | "-W" => out.wait = true,
                "--quiet" | "-q" => out.quiet = true,
                "--pipe" | "-P" => out.pipe = true,
                _ => return Err(format!("systemd-run: unrecognized option '{a}'")),
            }
        }
    }
    if out.command.is_empty() {
        return Err("Command line to execute required.".into());
    }
    Ok(out)
}

fn property(out: &mut RunArgs, p: &str) -> Result<(), String> {
    let (key, value) = p
        .split_once('=')
        .ok_or_else(|| format!("Not an assignment: {p}"))?;
    let target = match key {
        "StandardOutput" => &mut out.stdout,
        "StandardError" => &mut out.stderr,
        "IOWeight" | "CPUWeight" => {
            // systemd's cg_weight_parse: 1-10000.
            if !value
                .parse::<u32>()
                .is_ok_and(|w| (1..=10_000).contains(&w))
            {
                return Err(format!("Failed to parse {key}= value: {value}"));
            }
            out.properties.push(p.to_owned());
            return Ok(());
        }
        _ => {
            return Err(format!(
                "Failed to start transient service unit: Cannot set property {key}, or unknown property."
            ));
        }
    };
    *target = Some(value.to_owned());
    Ok(())
}

fn systemd_run(layout: &Layout, systemd: &FakeSystemd, args: &[String]) -> Result<i32, String> {
    let args = parse_run(args)?;
    let mut name = args
        .unit
        .clone()
        .unwrap_or_else(|| format!("run-u{}", random_id()));
    if !name.contains('.') {
        name.push_str(".service");
    }
    if systemd.unit(&name).is_some() {
        return Err(format!(
            "Failed to start transient service unit: Unit {name} was already loaded or has a fragment file."
        ));
    }
    for spec in [&args.stdout, &args.stderr].into_iter().flatten() {
        if let Some(path) = output_path(spec)
            && !path.parent().is_some_and(Path::is_dir)
        {
            return Err(format!(
                "Job for {name} failed. See \"systemctl status {name}\" and \"journalctl -xeu {name}\" for details."
            ));
        }
    }
    let invocation = random_id();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(systemd.dir.join("units")).map_err(|e| e.to_string())?;
    // The runner is not our child for long: its own process group, no
    // stdio of ours, and it outlives us (systemd runs the unit, not us).
    let mut runner = std::process::Command::new(exe);
    runner
        .arg("--fake-root")
        .arg(&layout.root)
        .args(["--as", "unit-runner", &name, &invocation])
        .arg(output_spec(&args, args.stdout.as_ref()))
        .arg(output_spec(&args, args.stderr.as_ref()))
        .arg(if args.collect { "collect" } else { "keep" })
        .arg(args.properties.join(","))
        .arg("--")
        .args(&args.command)
        .stdin(Stdio::null())
        .stdout(if args.pipe {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .stderr(if args.pipe {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .process_group(0);
    runner
        .spawn()
        .map_err(|e| format!("Failed to start transient service unit: {e}"))?;
    // Started: the unit is loaded (or has already finished).
    let deadline = Instant::now() + Duration::from_secs(10);
    while systemd.unit(&name).is_none() && !systemd.result_path(&invocation).exists() {
        if Instant::now() > deadline {
            return Err(format!(
                "Failed to start transient service unit {name}: timed out"
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if !args.quiet {
        let _ = writeln!(
            std::io::stderr(),
            "Running as unit: {name}; invocation ID: {invocation}"
        );
    }
    if !args.wait {
        return Ok(0);
    }
    let code = wait_for(systemd, &name, &invocation, args.quiet)?;
    if args.exec && code != 0 {
        return Err(job_failed(&name));
    }
    Ok(code)
}

/// Real systemd (252, seen in a node container) with `--service-type=exec`:
/// the start job waits for the exec, and a command that fails at once fails
/// the job itself; systemd-run then exits 1 with this message instead of the
/// command's status (in 2 to 3 runs of 5, a race). The fake does it for
/// every failure, so that nothing can rely on an exec unit's status.
fn job_failed(name: &str) -> String {
    format!(
        "Job for {name} failed because the control process exited with error code.\nSee \"systemctl status {name}\" and \"journalctl -xeu {name}\" for details."
    )
}

/// `--wait`: until the invocation ends; its exit status is ours.
fn wait_for(
    systemd: &FakeSystemd,
    name: &str,
    invocation: &str,
    quiet: bool,
) -> Result<i32, String> {
    loop {
        if let Ok(bytes) = std::fs::read(systemd.result_path(invocation))
            && let Ok(r) = serde_json::from_slice::<UnitResult>(&bytes)
        {
            if !quiet {
                let _ = writeln!(std::io::stderr(), "Finished with result: {}", r.result);
            }
            // systemd-run's own mapping: success 0, the exit status of a
            // failed main process, EXIT_EXCEPTION (255) for a signal, else 1.
            return Ok(match r.result.as_str() {
                "success" => 0,
                "exit-code" if r.exit_status > 0 => r.exit_status,
                "signal" => 255,
                _ => 1,
            });
        }
        let gone = systemd
            .unit(name)
            .is_none_or(|u| u.invocation_id != invocation);
        // Looked at again after the unit: it may have ended in between.
        if gone && !systemd.result_path(invocation).exists() {
            // Gone without an end: the machine went down (a reboot), which
            // would have killed us too. Park like everything else.
            std::thread::sleep(Duration::from_secs(60));
            return Ok(1);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the runner does with one of the unit's output streams.
fn output_spec(args: &RunArgs, property: Option<&String>) -> String {
    match property {
        Some(p) => p.clone(),
        None if args.pipe => "inherit".into(),
        None => "journal".into(),
    }
}

fn output_path(spec: &str) -> Option<PathBuf> {
    ["truncate:", "file:", "append:"]
        .iter()
        .find_map(|p| spec.strip_prefix(p))
        .map(PathBuf::from)
}

fn open_output(spec: &str) -> std::io::Result<Stdio> {
    if spec == "inherit" {
        return Ok(Stdio::inherit());
    }
    let Some(path) = output_path(spec) else {
        return Ok(Stdio::null());
    };
    let mut options = std::fs::OpenOptions::new();
    options.create(true).write(true);
    if spec.starts_with("append:") {
        options.append(true);
    } else if spec.starts_with("truncate:") {
        options.truncate(true);
    }
    Ok(Stdio::from(options.open(path)?))
}

/// The unit runner's comma-joined properties argument, split.
fn properties_of(arg: &str) -> Vec<String> {
    arg.split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The unit's supervisor: runs the command with systemd's environment and
/// the unit's output files, and records how it ended.
fn unit_runner(systemd: &FakeSystemd, args: &[String]) -> Result<i32, String> {
    let [
        name,
        invocation,
        stdout,
        stderr,
        collect,
        properties,
        dashdash,
        command @ ..,
    ] = args
    else {
        return Err("unit-runner: bad arguments".into());
    };
    if dashdash != "--" || command.is_empty() {
        return Err("unit-runner: bad arguments".into());
    }
    let started = micros();
    // As in systemd, the unit is loaded before its main process runs: the
    // process waits for a line on its stdin (then exec's the command with
    // stdin from /dev/null) until the unit is written, so that a command
    // that reboots the host at once (`bootc switch --apply`) finds its own
    // unit to kill, instead of leaving it recorded as active for ever.
    let spawned = (|| -> std::io::Result<std::process::Child> {
        std::process::Command::new("/bin/sh")
            .args(["-c", r#"read -r _; exec "$0" "$@" </dev/null"#])
            .args(command)
            .env_clear()
            .env("PATH", UNIT_PATH)
            .env("INVOCATION_ID", invocation)
            .stdin(Stdio::piped())
            .stdout(open_output(stdout)?)
            .stderr(open_output(stderr)?)
            .spawn()
    })();
    let mut result = UnitResult {
        name: name.clone(),
        invocation_id: invocation.clone(),
        result: "resources".into(),
        exit_status: 203,
        argv: command.to_vec(),
        properties: properties_of(properties),
        started_micros: started,
        finished_micros: 0,
    };
    if let Ok(mut child) = spawned {
        let unit = Unit {
            name: name.clone(),
            state: "active".into(),
            invocation_id: invocation.clone(),
            main_pid: i32::try_from(child.id()).unwrap_or(0),
            runner_pid: i32::try_from(std::process::id()).unwrap_or(0),
            argv: command.to_vec(),
            collect: collect == "collect",
            properties: properties_of(properties),
        };
        systemd.write_unit(&unit).map_err(|e| e.to_string())?;
        if let Some(mut gate) = child.stdin.take() {
            let _ = gate.write_all(b"go\n");
        }
        let status = child.wait().map_err(|e| e.to_string())?;
        (result.result, result.exit_status) = match status.code() {
            Some(0) => ("success".into(), 0),
            Some(code) => ("exit-code".into(), code),
            None => ("signal".into(), 1),
        };
    }
    result.finished_micros = micros();
    // Stopped by `systemctl stop` or a reboot meanwhile: not ours to record.
    match systemd.unit(name) {
        Some(u) if u.invocation_id == *invocation => {
            // The result first: `systemd-run --wait` takes a unit gone
            // without a result for a machine going down.
            systemd.finish(&result).map_err(|e| e.to_string())?;
            if result.result == "success" || collect == "collect" {
                systemd.remove_unit(name);
            } else {
                let failed = Unit {
                    state: "failed".into(),
                    ..u
                };
                systemd.write_unit(&failed).map_err(|e| e.to_string())?;
            }
        }
        None if result.result == "resources" => {
            systemd.finish(&result).map_err(|e| e.to_string())?;
        }
        _ => {}
    }
    Ok(0)
}

fn systemctl(systemd: &FakeSystemd, args: &[String]) -> Result<i32, String> {
    let args: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--quiet" && *a != "--no-pager")
        .collect();
    let with_suffix = |n: &str| {
        if n.contains('.') {
            n.to_owned()
        } else {
            format!("{n}.service")
        }
    };
    match args.as_slice() {
        ["is-active", name] => {
            let state = systemd
                .unit(&with_suffix(name))
                .map(|u| u.state)
                .unwrap_or_else(|| "inactive".into());
            let _ = writeln!(std::io::stdout(), "{state}");
            Ok(if state == "active" { 0 } else { 3 })
        }
        ["stop", name] => {
            systemd
                .stop(&with_suffix(name))
                .map_err(|e| e.to_string())?;
            Ok(0)
        }
        ["reset-failed", name] => {
            let name = with_suffix(name);
            if systemd.unit(&name).is_some_and(|u| u.state == "failed") {
                systemd.remove_unit(&name);
            }
            Ok(0)
        }
        ["show", rest @ ..] => {
            show(systemd, rest)?;
            Ok(0)
        }
        [verb, ..] => Err(format!("Unknown command verb '{verb}'.")),
        [] => Err("fake systemctl: a verb is required".into()),
    }
}

/// `systemctl show [--property=A,B] [--] <unit>...`: one block per unit,
/// separated by a blank line, as systemd prints them.
fn show(systemd: &FakeSystemd, args: &[&str]) -> Result<(), String> {
    let mut properties = vec!["Id", "LoadState", "UnitFileState", "ActiveState"];
    let mut units = Vec::new();
    let mut options_done = false;
    for arg in args {
        match arg.strip_prefix("--property=") {
            Some(list) if !options_done => properties = list.split(',').collect(),
            _ if *arg == "--" && !options_done => options_done = true,
            _ if arg.starts_with('-') && !options_done => {
                return Err(format!("fake systemctl show: unknown option {arg}"));
            }
            _ => units.push(*arg),
        }
    }
    let blocks: Vec<String> = units.iter().map(|u| systemd.show(u, &properties)).collect();
    let _ = write!(std::io::stdout(), "{}", blocks.join("\n"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn shows_installed_units_as_systemd_does() {
        let dir = tempfile::tempdir().unwrap();
        let systemd = FakeSystemd::new(dir.path().to_owned());
        systemd.set_unit_file("a.timer", "enabled").unwrap();
        systemd.set_unit_file("b.timer", "masked").unwrap();
        let props = ["Id", "UnitFileState", "ActiveState"];
        assert_eq!(
            systemd.show("a.timer", &props),
            "Id=a.timer\nUnitFileState=enabled\nActiveState=active\n"
        );
        assert_eq!(
            systemd.show("b.timer", &props),
            "Id=b.timer\nUnitFileState=masked\nActiveState=inactive\n"
        );
        assert_eq!(
            systemd.show("c.service", &["Id", "LoadState", "UnitFileState"]),
            "Id=c.service\nLoadState=not-found\nUnitFileState=\n"
        );
    }

    #[test]
    fn parses_the_helpers_argv() {
        let a = parse_run(&v(&[
            "--unit=bootc-operator-stage",
            "--collect",
            "--wait",
            "--quiet",
            "--service-type=simple",
            "--property=StandardOutput=truncate:/run/x/o",
            "--property=StandardError=truncate:/run/x/e",
            "--",
            "bootc",
            "switch",
        ]))
        .unwrap();
        assert_eq!(a.unit.as_deref(), Some("bootc-operator-stage"));
        assert!(a.collect && a.wait && a.quiet && !a.exec);
        assert_eq!(a.stdout.as_deref(), Some("truncate:/run/x/o"));
        assert_eq!(a.command, v(&["bootc", "switch"]));
        assert!(parse_run(&v(&["--bogus", "--", "x"])).is_err());
        assert!(parse_run(&v(&["--property=CPUQuota=5%", "--", "x"])).is_err());
        // systemd's weights: 1-10000, recorded as given.
        let weights = parse_run(&v(&[
            "--property=IOWeight=1",
            "--property=CPUWeight=10000",
            "--",
            "x",
        ]));
        assert_eq!(
            weights.unwrap().properties,
            ["IOWeight=1", "CPUWeight=10000"]
        );
        for bad in [
            "IOWeight=0",
            "CPUWeight=10001",
            "IOWeight=",
            "CPUWeight=idle",
        ] {
            let p = format!("--property={bad}");
            assert!(parse_run(&v(&[&p, "--", "x"])).is_err(), "{bad}");
        }
        assert!(parse_run(&v(&["--wait"])).is_err());
    }
}
