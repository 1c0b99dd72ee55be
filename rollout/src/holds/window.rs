//! Maintenance windows (`spec.rollout.maintenanceWindows`): when a new
//! reboot slot may be handed out.
//!
//! * A pool without windows hands out slots at any time.
//! * A window opens on each of its days (every day when it names none) at
//!   its start, in its time zone (UTC when unset), and stays open for its
//!   duration, counted in elapsed time; it may cross midnight. Windows that
//!   overlap or touch make one: the pool is inside while any is open, until
//!   the last of them closes.
//! * Daylight saving does what a person expects: a start the clock skips
//!   (02:30 on the night it jumps from 02:00 to 03:00) opens when the clock
//!   jumps; a start the clock passes twice (the night it goes back) opens
//!   the first time only, so a window never runs twice on one day.
//! * Only new slots wait. A node in a slot when the window closes finishes
//!   its reboot, and staging goes on outside the windows: a node waits with
//!   its image downloaded and takes a slot as soon as a window opens.
//! * A window that cannot be read (a time zone the schema could not check)
//!   holds new slots (fail closed) and is reported as `InvalidSpec`, naming
//!   the field and the value.
//!
//! Blackouts (`spec.rollout.blackouts`, a change freeze) take time out of
//! the windows: from a blackout's start (a wall-clock date and time in its
//! zone, UTC when unset) to its end no new slot is handed out, even inside
//! a window. The next opening a closed window or a blackout reports is the
//! first instant inside a window and outside every blackout; a blackout
//! that cannot be read holds new slots (fail closed, `InvalidSpec`).
//!
//! Time zones come from the database built into the binary (jiff's bundled
//! tzdb), never from the host's files: the image has none.

use api::{Blackout, MaintenanceWindow, Reason, RolloutSpec, Weekday};
use jiff::civil::{self, Date, DateTime, Time};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{SignedDuration, Timestamp, ToSpan};

use crate::model::Problem;

/// The longest window: a week.
pub const MAX_WINDOW: SignedDuration = SignedDuration::from_hours(7 * 24);

/// Where an instant stands with respect to the pool's windows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Window {
    /// The pool has no windows: new slots at any time.
    #[default]
    Always,
    /// Inside a window, which closes at this instant.
    Open { closes: Timestamp },
    /// Outside every window. The next one opens at this instant; None when
    /// a window cannot be read.
    Closed { opens: Option<Timestamp> },
    /// Inside a blackout, which ends at `ends` (None: a blackout cannot be
    /// read); new slots may be handed out again at `opens` (the windows
    /// counted).
    Blackout {
        ends: Option<Timestamp>,
        opens: Option<Timestamp>,
    },
}

impl Window {
    /// May a new reboot slot be handed out?
    pub fn allows_new_slots(self) -> bool {
        !matches!(self, Window::Closed { .. } | Window::Blackout { .. })
    }

    /// When new slots may be handed out next, while they may not (None:
    /// they may now, or nobody knows).
    pub fn opens(self) -> Option<Timestamp> {
        match self {
            Window::Always | Window::Open { .. } => None,
            Window::Closed { opens } | Window::Blackout { opens, .. } => opens,
        }
    }

    /// When this answer changes next (the pool is looked at again then).
    pub fn changes_at(self) -> Option<Timestamp> {
        match self {
            Window::Always => None,
            Window::Open { closes } => Some(closes),
            Window::Closed { opens } => opens,
            Window::Blackout { ends, .. } => ends,
        }
    }
}

/// One window, read.
#[derive(Clone, Debug)]
struct Opening {
    /// Empty: every day.
    days: Vec<civil::Weekday>,
    start: Time,
    duration: SignedDuration,
    zone: TimeZone,
}

/// The pool's windows at `now`. A window that cannot be read is a problem
/// and holds new slots.
pub fn at(windows: &[MaintenanceWindow], now: Timestamp, problems: &mut Vec<Problem>) -> Window {
    if windows.is_empty() {
        return Window::Always;
    }
    match read(windows) {
        Ok(openings) => position(&openings, now),
        Err(e) => {
            problems.push((Reason::InvalidSpec, e));
            Window::Closed { opens: None }
        }
    }
}

/// The pool's windows less its blackouts, at `now`: a blackout holds new
/// slots inside a window, and an opening that falls in a blackout moves to
/// its end. A window or blackout that cannot be read is a problem and holds
/// new slots.
pub fn of(rollout: &RolloutSpec, now: Timestamp, problems: &mut Vec<Problem>) -> Window {
    let windows = &rollout.maintenance_windows;
    let window = at(windows, now, problems);
    if rollout.blackouts.is_empty() {
        return window;
    }
    let blackouts = match read_blackouts(&rollout.blackouts) {
        Ok(spans) => spans,
        Err(e) => {
            problems.push((Reason::InvalidSpec, e));
            return Window::Blackout {
                ends: None,
                opens: None,
            };
        }
    };
    if let Some(end) = inside(&blackouts, now) {
        return Window::Blackout {
            ends: Some(end),
            opens: next_opening(windows, &blackouts, end),
        };
    }
    let next_blackout = blackouts.iter().map(|(s, _)| *s).find(|s| *s > now);
    match (window, next_blackout) {
        (Window::Always, Some(starts)) => Window::Open { closes: starts },
        (Window::Open { closes }, Some(starts)) => Window::Open {
            closes: closes.min(starts),
        },
        (Window::Closed { opens: Some(at) }, _) => Window::Closed {
            opens: next_opening(windows, &blackouts, at),
        },
        (window, _) => window,
    }
}

/// The end of the blackout `t` is in, if any.
fn inside(blackouts: &[(Timestamp, Timestamp)], t: Timestamp) -> Option<Timestamp> {
    blackouts
        .iter()
        .find(|(start, end)| *start <= t && t < *end)
        .map(|(_, end)| *end)
}

/// The first instant from `from` inside a window and outside every
/// blackout. Each turn passes a blackout or reaches a window's opening, so
/// two turns per blackout (and one more) reach it.
fn next_opening(
    windows: &[MaintenanceWindow],
    blackouts: &[(Timestamp, Timestamp)],
    from: Timestamp,
) -> Option<Timestamp> {
    let mut t = from;
    for _ in 0..=2 * blackouts.len() + 1 {
        if let Some(end) = inside(blackouts, t) {
            t = end;
            continue;
        }
        match at(windows, t, &mut Vec::new()) {
            Window::Closed { opens } => t = opens?,
            _ => return Some(t),
        }
    }
    None
}

/// Reads every blackout, merged where they overlap or touch, in time
/// order; the error names the field and its value.
fn read_blackouts(blackouts: &[Blackout]) -> Result<Vec<(Timestamp, Timestamp)>, String> {
    let spans = blackouts
        .iter()
        .enumerate()
        .map(|(i, b)| read_blackout(b).map_err(|e| format!("spec.rollout.blackouts[{i}].{e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(merged(spans))
}

/// Spans in time order, those that overlap or touch made one.
fn merged(mut spans: Vec<(Timestamp, Timestamp)>) -> Vec<(Timestamp, Timestamp)> {
    spans.sort();
    let mut out: Vec<(Timestamp, Timestamp)> = Vec::new();
    for (start, end) in spans {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

fn read_blackout(b: &Blackout) -> Result<(Timestamp, Timestamp), String> {
    let zone = zone(b.time_zone.as_deref())?;
    let instant = |field: &str, value: &str| {
        civil_date_time(value)
            .and_then(|wall| first_instant(&zone, wall))
            .ok_or_else(|| {
                format!("{field} {value:?} is not a date and time YYYY-MM-DDTHH:MM (such as 2026-12-20T18:00)")
            })
    };
    let start = instant("start", &b.start)?;
    let end = instant("end", &b.end)?;
    if end <= start {
        return Err(format!(
            "end {:?} does not come after start {:?}",
            b.end, b.start
        ));
    }
    Ok((start, end))
}

/// `YYYY-MM-DDTHH:MM` (the schema's pattern).
fn civil_date_time(s: &str) -> Option<DateTime> {
    let (date, time) = s.split_once('T')?;
    let date: Date = date.parse().ok()?;
    Some(date.to_datetime(start_time(time)?))
}

/// A time zone by its IANA name, from the bundled database (UTC if unset).
fn zone(name: Option<&str>) -> Result<TimeZone, String> {
    match name {
        None => Ok(TimeZone::UTC),
        Some(name) => jiff::tz::db().get(name).map_err(|_| {
            format!("timeZone {name:?} is not a known IANA time zone (such as Europe/Paris)")
        }),
    }
}

/// Reads every window; the error names the field and its value.
fn read(windows: &[MaintenanceWindow]) -> Result<Vec<Opening>, String> {
    windows
        .iter()
        .enumerate()
        .map(|(i, w)| read_one(w).map_err(|e| format!("spec.rollout.maintenanceWindows[{i}].{e}")))
        .collect()
}

fn read_one(w: &MaintenanceWindow) -> Result<Opening, String> {
    let start = start_time(&w.start)
        .ok_or_else(|| format!("start {:?} is not a time HH:MM (00:00 to 23:59)", w.start))?;
    let duration = duration(&w.duration)
        .filter(|d| d.is_positive() && *d <= MAX_WINDOW)
        .ok_or_else(|| {
            format!(
                "duration {:?} is not hours and minutes (such as 4h or 1h30m) of more than zero and at most 168h",
                w.duration
            )
        })?;
    let zone = zone(w.time_zone.as_deref())?;
    Ok(Opening {
        days: w.days.iter().map(|d| weekday(*d)).collect(),
        start,
        duration,
        zone,
    })
}

/// `HH:MM` on a 24-hour clock.
fn start_time(s: &str) -> Option<Time> {
    let (h, m) = s.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    Time::new(h.parse().ok()?, m.parse().ok()?, 0, 0).ok()
}

/// `4h`, `90m`, `1h30m` (the schema's pattern).
fn duration(s: &str) -> Option<SignedDuration> {
    let (hours, rest) = match s.split_once('h') {
        Some((h, rest)) => (h.parse::<i64>().ok()?, rest),
        None => (0, s),
    };
    let minutes = match rest {
        "" => 0,
        m => m.strip_suffix('m')?.parse::<i64>().ok()?,
    };
    let total = hours.checked_mul(60)?.checked_add(minutes)?;
    Some(SignedDuration::from_mins(total))
}

fn weekday(day: Weekday) -> civil::Weekday {
    match day {
        Weekday::Monday => civil::Weekday::Monday,
        Weekday::Tuesday => civil::Weekday::Tuesday,
        Weekday::Wednesday => civil::Weekday::Wednesday,
        Weekday::Thursday => civil::Weekday::Thursday,
        Weekday::Friday => civil::Weekday::Friday,
        Weekday::Saturday => civil::Weekday::Saturday,
        Weekday::Sunday => civil::Weekday::Sunday,
    }
}

/// Days looked at on each side of today: a window opened up to a week ago
/// may still be open, and each window opens at least once a week.
const HORIZON_DAYS: i32 = 8;

/// Where `now` stands: the windows' openings around it, merged where they
/// overlap or touch.
fn position(openings: &[Opening], now: Timestamp) -> Window {
    let merged = merged(openings.iter().flat_map(|o| o.spans_around(now)).collect());
    if let Some((_, end)) = merged.iter().find(|(s, e)| *s <= now && now < *e) {
        return Window::Open { closes: *end };
    }
    Window::Closed {
        opens: merged.iter().map(|(s, _)| *s).find(|s| *s > now),
    }
}

impl Opening {
    /// Each time this window is open, from a week before `now` to a week
    /// after, as (opens, closes).
    fn spans_around(&self, now: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        let today = now.to_zoned(self.zone.clone()).date();
        (-HORIZON_DAYS..=HORIZON_DAYS)
            .filter_map(|offset| today.checked_add(offset.days()).ok())
            .filter(|day| self.days.is_empty() || self.days.contains(&day.weekday()))
            .filter_map(|day| self.span_on(day))
            .collect()
    }

    fn span_on(&self, day: Date) -> Option<(Timestamp, Timestamp)> {
        let opens = first_instant(&self.zone, day.to_datetime(self.start))?;
        Some((opens, opens.checked_add(self.duration).ok()?))
    }
}

/// The instant a wall-clock time first happens in `zone`: when the clock
/// skips it, the instant the clock jumps; when it happens twice, the first.
fn first_instant(zone: &TimeZone, wall: DateTime) -> Option<Timestamp> {
    let ambiguous = zone.to_ambiguous_timestamp(wall);
    match ambiguous.offset() {
        AmbiguousOffset::Gap { before, .. } => {
            // Read with the offset before the jump, the wall time lies past
            // the jump; the transition preceding it is the jump itself.
            let past_jump = before.to_timestamp(wall).ok()?;
            zone.preceding(past_jump).next().map(|t| t.timestamp())
        }
        _ => ambiguous.earlier().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(
        days: &[Weekday],
        start: &str,
        duration: &str,
        zone: Option<&str>,
    ) -> MaintenanceWindow {
        MaintenanceWindow {
            days: days.to_vec(),
            start: start.to_owned(),
            duration: duration.to_owned(),
            time_zone: zone.map(str::to_owned),
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn open(closes: &str) -> Window {
        Window::Open { closes: ts(closes) }
    }

    fn closed(opens: &str) -> Window {
        Window::Closed {
            opens: Some(ts(opens)),
        }
    }

    #[test]
    fn where_an_instant_stands() {
        use Weekday::*;
        let daily = |start, duration| window(&[], start, duration, None);
        let paris = |start, duration| window(&[], start, duration, Some("Europe/Paris"));
        let new_york = |start, duration| window(&[], start, duration, Some("America/New_York"));
        // 2026-11-25 is a Wednesday. Europe/Paris jumps from 02:00 to 03:00
        // on 2026-03-29 (01:00 UTC); America/New_York goes back from 02:00
        // EDT to 01:00 EST on 2026-11-01 (06:00 UTC).
        #[rustfmt::skip]
        let rows: Vec<(&str, Vec<MaintenanceWindow>, &str, Window)> = vec![
            ("no windows", vec![], "2026-11-25T12:00:00Z", Window::Always),
            ("inside", vec![daily("02:00", "4h")], "2026-11-25T03:00:00Z", open("2026-11-25T06:00:00Z")),
            ("at the opening minute", vec![daily("02:00", "4h")], "2026-11-25T02:00:00Z", open("2026-11-25T06:00:00Z")),
            ("at the closing instant", vec![daily("02:00", "4h")], "2026-11-25T06:00:00Z", closed("2026-11-26T02:00:00Z")),
            ("after: tomorrow's", vec![daily("02:00", "4h")], "2026-11-25T07:00:00Z", closed("2026-11-26T02:00:00Z")),
            ("across midnight", vec![daily("22:00", "4h")], "2026-11-25T01:00:00Z", open("2026-11-25T02:00:00Z")),
            ("named days only", vec![window(&[Saturday], "01:00", "2h", None)], "2026-11-25T12:00:00Z", closed("2026-11-28T01:00:00Z")),
            ("the named day", vec![window(&[Wednesday, Saturday], "11:30", "90m", None)], "2026-11-25T12:00:00Z", open("2026-11-25T13:00:00Z")),
            ("overlapping windows are one", vec![daily("01:00", "2h"), daily("02:00", "2h")], "2026-11-25T01:30:00Z", open("2026-11-25T04:00:00Z")),
            ("touching windows are one", vec![daily("01:00", "1h"), daily("02:00", "1h")], "2026-11-25T01:30:00Z", open("2026-11-25T03:00:00Z")),
            ("the earliest next one", vec![daily("09:00", "1h"), daily("05:00", "1h")], "2026-11-25T03:00:00Z", closed("2026-11-25T05:00:00Z")),
            ("in its time zone", vec![window(&[], "09:00", "1h", Some("Asia/Tokyo"))], "2026-11-25T00:30:00Z", open("2026-11-25T01:00:00Z")),
            ("a week-long window", vec![window(&[Monday], "00:00", "168h", None)], "2026-11-25T12:00:00Z", open("2026-12-07T00:00:00Z")),
            ("a skipped start opens at the jump", vec![paris("02:30", "1h")], "2026-03-29T00:00:00Z", closed("2026-03-29T01:00:00Z")),
            ("and lasts its duration from there", vec![paris("02:30", "1h")], "2026-03-29T01:30:00Z", open("2026-03-29T02:00:00Z")),
            ("a start passed twice opens once", vec![new_york("01:30", "1h")], "2026-11-01T05:45:00Z", open("2026-11-01T06:30:00Z")),
            ("and not again the second time", vec![new_york("01:30", "1h")], "2026-11-01T06:45:00Z", closed("2026-11-02T06:30:00Z")),
        ];
        for (what, windows, now, want) in rows {
            let mut problems = Vec::new();
            assert_eq!(at(&windows, ts(now), &mut problems), want, "{what}");
            assert!(problems.is_empty(), "{what}: {problems:?}");
        }
    }

    #[test]
    fn a_window_that_cannot_be_read_holds_slots_and_names_the_field() {
        let now = ts("2026-11-25T12:00:00Z");
        let rows = [
            (
                window(&[], "02:00", "4h", Some("Mars/Olympus_Mons")),
                r#"spec.rollout.maintenanceWindows[1].timeZone "Mars/Olympus_Mons""#,
            ),
            (
                window(&[], "02:00", "0h", None),
                r#"spec.rollout.maintenanceWindows[1].duration "0h""#,
            ),
            (
                window(&[], "02:00", "169h", None),
                r#"spec.rollout.maintenanceWindows[1].duration "169h""#,
            ),
            (
                window(&[], "24:00", "4h", None),
                r#"spec.rollout.maintenanceWindows[1].start "24:00""#,
            ),
        ];
        for (bad, named) in rows {
            let mut problems = Vec::new();
            let windows = [window(&[], "00:00", "24h", None), bad];
            assert_eq!(
                at(&windows, now, &mut problems),
                Window::Closed { opens: None },
                "{named}"
            );
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].0, Reason::InvalidSpec);
            assert!(problems[0].1.starts_with(named), "{problems:?}");
        }
    }

    #[test]
    fn durations_read_as_the_schema_writes_them() {
        let rows = [
            ("4h", Some(240)),
            ("90m", Some(90)),
            ("1h30m", Some(90)),
            ("0h", Some(0)),
            ("h", None),
            ("4", None),
            ("30m4h", None),
        ];
        for (s, minutes) in rows {
            assert_eq!(duration(s), minutes.map(SignedDuration::from_mins), "{s}");
        }
    }
}
