//! The calls a policy answers outside a run, checked on fresh instances: its tunables'
//! ranges, defaults and refusals, and its saved state's round trip.

use super::*;

/// Defaults inside their ranges; after `init`, `get` gives the default; `set` to each end
/// of the range reads back; one past an end is refused. A fault ends the check (the
/// instance is gone). Returns the tunables checked.
pub(super) fn check_tunables(
    make: &Maker,
    settings: &[(String, i64)],
    note: &mut dyn FnMut(&'static str, String),
) -> usize {
    let Ok(mut p) = make() else { return 0 };
    let tunables = match p.tunables() {
        Ok(t) => t,
        Err(f) => {
            note("tunables", one_line(&f));
            return 0;
        }
    };
    match p.init(&SETUP, settings) {
        Ok(Ok(())) => {}
        Ok(Err(why)) => {
            note("init", format!("init refused the settings: {why}"));
            return 0;
        }
        Err(f) => {
            note("init", one_line(&f));
            return 0;
        }
    }
    for (checked, t) in tunables.iter().enumerate() {
        if let Err(fault) = check_tunable(p.as_mut(), t, settings, note) {
            note("tunables", format!("{}: {}", t.name, one_line(&fault)));
            return checked;
        }
    }
    tunables.len()
}

fn check_tunable(
    p: &mut dyn PolicyBackend,
    t: &Tunable,
    settings: &[(String, i64)],
    note: &mut dyn FnMut(&'static str, String),
) -> Result<(), Fault> {
    let name = &t.name;
    if !(t.min..=t.max).contains(&t.default) {
        note(
            "tunables",
            format!(
                "{name}: default {} outside {}..={}",
                t.default, t.min, t.max
            ),
        );
    }
    let expected = settings
        .iter()
        .rev()
        .find(|(n, _)| n == name)
        .map_or(t.default, |&(_, v)| v);
    let got = p.get(name)?;
    if got != Some(expected) {
        note(
            "tunables",
            format!("{name}: get after init answered {got:?}, not {expected}"),
        );
    }
    round_trip(p, name, t.min, "minimum", note)?;
    round_trip(p, name, t.max, "maximum", note)?;
    for outside in [t.min.checked_sub(1), t.max.checked_add(1)]
        .into_iter()
        .flatten()
    {
        if p.set(name, outside)?.is_ok() {
            note(
                "tunables",
                format!(
                    "{name}: {outside} is outside {}..={} but was accepted",
                    t.min, t.max
                ),
            );
        }
    }
    round_trip(p, name, expected, "setting", note)
}

/// `set` to `value` is accepted and `get` reads it back.
fn round_trip(
    p: &mut dyn PolicyBackend,
    name: &str,
    value: i64,
    what: &str,
    note: &mut dyn FnMut(&'static str, String),
) -> Result<(), Fault> {
    if let Err(why) = p.set(name, value)? {
        note(
            "tunables",
            format!("{name}: its {what} {value} was refused: {why}"),
        );
        return Ok(());
    }
    let back = p.get(name)?;
    if back != Some(value) {
        note(
            "tunables",
            format!("{name}: set to its {what} {value}, get answered {back:?}"),
        );
    }
    Ok(())
}

/// The state a started instance saves restores into a fresh one, which saves the same
/// bytes again. Returns the state's size.
pub(super) fn check_state(
    make: &Maker,
    settings: &[(String, i64)],
    note: &mut dyn FnMut(&'static str, String),
) -> Option<usize> {
    let started = |note: &mut dyn FnMut(&'static str, String)| {
        let mut p = make().map_err(|e| note("start", e)).ok()?;
        match p.init(&SETUP, settings) {
            Ok(Ok(())) => Some(p),
            _ => None,
        }
    };
    let mut old = started(note)?;
    let saved = match old.save_state() {
        Ok(bytes) => bytes,
        Err(f) => {
            note("save-restore", format!("saving: {}", one_line(&f)));
            return None;
        }
    };
    let mut new = started(note)?;
    match new.restore_state(&saved) {
        Ok(Ok(())) => {}
        Ok(Err(why)) => {
            note(
                "save-restore",
                format!(
                    "its own saved state ({} bytes) was refused: {why}",
                    saved.len()
                ),
            );
            return None;
        }
        Err(f) => {
            note(
                "save-restore",
                format!(
                    "restoring its own saved state ({} bytes): {}",
                    saved.len(),
                    one_line(&f)
                ),
            );
            return None;
        }
    }
    match new.save_state() {
        Ok(again) if again == saved => Some(saved.len()),
        Ok(again) => {
            note(
                "save-restore",
                format!(
                    "restored from {} bytes, it saved {} different bytes",
                    saved.len(),
                    again.len()
                ),
            );
            None
        }
        Err(f) => {
            note(
                "save-restore",
                format!("saving after a restore: {}", one_line(&f)),
            );
            None
        }
    }
}
