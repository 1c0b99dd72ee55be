//! The report: its table's rows, printed as they come and written to
//! BENCHMARKS.md.

use std::io::Write;

pub(crate) fn out(text: &str) {
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// One line of the table.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) figure: String,
    pub(crate) value: String,
    pub(crate) target: String,
    pub(crate) verdict: &'static str,
}

pub(crate) fn row(
    figure: impl Into<String>,
    value: impl Into<String>,
    target: &str,
    ok: Option<bool>,
) -> Row {
    Row {
        figure: figure.into(),
        value: value.into(),
        target: target.to_owned(),
        verdict: match ok {
            None => "-",
            Some(true) => "ok",
            Some(false) => "MISSED",
        },
    }
}

#[derive(Debug, Default)]
pub(crate) struct Report {
    rows: Vec<Row>,
    /// Detail sections (markdown), printed after the table.
    pub(crate) details: Vec<String>,
    pub(crate) notes: Vec<String>,
}

impl Report {
    pub(crate) fn push(&mut self, r: Row) {
        out(&format!(
            "  {:<58} {:>16}  target {:<14} {}\n",
            r.figure, r.value, r.target, r.verdict
        ));
        self.rows.push(r);
    }

    pub(crate) fn table(&self) -> String {
        let mut s = String::from("| Figure | Measured | Target | |\n|---|---:|---|---|\n");
        // A `|` inside a cell would end it: Markdown takes `\|` as the character.
        let cell = |text: &str| text.replace('|', "\\|");
        for r in &self.rows {
            s.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                cell(&r.figure),
                cell(&r.value),
                cell(&r.target),
                r.verdict
            ));
        }
        s
    }
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Where a run's figures go in BENCHMARKS.md: between these lines, so that
/// what the file says below them (what changed and why) outlives the run.
pub(crate) const BEGIN: &str = "<!-- bench:begin -->";
pub(crate) const END: &str = "<!-- bench:end -->";

/// `existing` (None: no file yet) with `generated` between its markers.
pub(crate) fn spliced(existing: Option<&str>, generated: &str) -> Result<String, String> {
    let Some(existing) = existing else {
        return Ok(format!("# Benchmarks\n\n{BEGIN}\n{generated}{END}\n"));
    };
    match (existing.find(BEGIN), existing.find(END)) {
        (Some(begin), Some(end)) if begin < end => Ok(format!(
            "{}{BEGIN}\n{generated}{}",
            &existing[..begin],
            &existing[end..]
        )),
        _ => Err(format!(
            "the file has no {BEGIN} ... {END} lines (in that order) around the run's figures: \
             add them where the figures go, or write elsewhere with --output"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_replaces_only_what_is_between_the_markers() {
        let file = format!("# Benchmarks\nintro\n{BEGIN}\nold table\n{END}\n## History\nkept\n");
        let out = spliced(Some(&file), "new table\n").unwrap();
        assert_eq!(
            out,
            format!("# Benchmarks\nintro\n{BEGIN}\nnew table\n{END}\n## History\nkept\n")
        );
        assert_eq!(
            spliced(None, "t\n").unwrap(),
            format!("# Benchmarks\n\n{BEGIN}\nt\n{END}\n")
        );
        assert!(spliced(Some("no markers"), "t").is_err());
        assert!(spliced(Some(&format!("{END}{BEGIN}")), "t").is_err());
    }
}
