//! What a policy says about itself is checked before the host keeps or prints it: names,
//! versions and help texts are bounded and printable, tunables are few, distinct and
//! consistent, and refusal messages are cut to a readable length. A component is
//! third-party code; its strings reach reports, metrics labels and terminals.

use schedhost_sdk::{Info, Tunable};

/// Longest name, version, tunable name or unit.
pub const MAX_NAME: usize = 64;
/// Longest tunable help text.
pub const MAX_HELP: usize = 512;
/// Longest message a policy's refusal or error carries; longer ones are cut.
pub const MAX_MESSAGE: usize = 1024;
/// Most tunables a policy may declare.
pub const MAX_TUNABLES: usize = 256;

/// `info`'s answer, if it is within the bounds.
///
/// # Errors
/// What is wrong with it.
pub fn check_info(info: &Info) -> Result<(), String> {
    check_text("its name", &info.name, MAX_NAME)?;
    check_text("its version", &info.version, MAX_NAME)?;
    if info.name.is_empty() {
        return Err("its name is empty".into());
    }
    Ok(())
}

/// `tunables`' answer, if it is within the bounds: at most [`MAX_TUNABLES`], no name twice,
/// `min <= default <= max`.
///
/// # Errors
/// What is wrong with it, naming the tunable.
pub fn check_tunables(tunables: &[Tunable]) -> Result<(), String> {
    if tunables.len() > MAX_TUNABLES {
        return Err(format!(
            "it declares {} tunables; at most {MAX_TUNABLES} are accepted",
            tunables.len()
        ));
    }
    for (i, t) in tunables.iter().enumerate() {
        check_text("a tunable's name", &t.name, MAX_NAME)?;
        if t.name.is_empty() || t.name.contains(['=', ' ']) {
            return Err(format!(
                "tunable {:?}: a name is non-empty, without '=' or spaces",
                t.name
            ));
        }
        check_text(&format!("tunable {}'s unit", t.name), &t.unit, MAX_NAME)?;
        check_text(&format!("tunable {}'s help", t.name), &t.help, MAX_HELP)?;
        if !(t.min <= t.default && t.default <= t.max) {
            return Err(format!(
                "tunable {}: its default {} lies outside its range {}..={}",
                t.name, t.default, t.min, t.max
            ));
        }
        if tunables[..i].iter().any(|earlier| earlier.name == t.name) {
            return Err(format!("tunable {} is declared twice", t.name));
        }
    }
    Ok(())
}

/// A policy's message cut to [`MAX_MESSAGE`] bytes and stripped of control characters.
pub fn bound_message(message: String) -> String {
    if message.len() <= MAX_MESSAGE && !message.chars().any(char::is_control) {
        return message;
    }
    let mut cut: String = message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .scan(0usize, |len, c| {
            *len += c.len_utf8();
            (*len <= MAX_MESSAGE).then_some(c)
        })
        .collect();
    if message.len() > MAX_MESSAGE {
        cut.push_str(" […]");
    }
    cut
}

/// `text` is at most `max` bytes with no control characters.
fn check_text(what: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max {
        return Err(format!(
            "{what} is {} bytes; at most {max} are accepted",
            text.len()
        ));
    }
    if text.chars().any(char::is_control) {
        return Err(format!("{what} contains control characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tunable(name: &str, default: i64, min: i64, max: i64) -> Tunable {
        Tunable {
            name: name.into(),
            default,
            min,
            max,
            unit: String::new(),
            help: String::new(),
        }
    }

    #[test]
    fn tunables_declared_twice_or_defaulting_outside_their_range_are_refused() {
        assert_eq!(
            check_tunables(&[tunable("a", 1, 0, 2), tunable("b", 0, 0, 0)]),
            Ok(())
        );
        let twice = check_tunables(&[tunable("a", 1, 0, 2), tunable("a", 1, 0, 2)]);
        assert!(twice.unwrap_err().contains("declared twice"));
        let outside = check_tunables(&[tunable("a", 5, 0, 2)]);
        assert!(outside.unwrap_err().contains("outside its range"));
        let many: Vec<_> = (0..300)
            .map(|i| tunable(&format!("t{i}"), 0, 0, 0))
            .collect();
        assert!(check_tunables(&many).unwrap_err().contains("at most 256"));
    }

    #[test]
    fn oversized_or_unprintable_info_is_refused_and_messages_are_cut() {
        let info = |name: &str| Info {
            name: name.into(),
            version: "1".into(),
            merge_veto: false,
            completions: false,
            weighted_tags: false,
        };
        assert_eq!(check_info(&info("noop")), Ok(()));
        assert!(check_info(&info(&"x".repeat(65))).is_err());
        assert!(check_info(&info("a\u{1b}[2Jb")).is_err());
        let cut = bound_message("é".repeat(5000));
        assert!(cut.len() <= MAX_MESSAGE + " […]".len());
        assert_eq!(bound_message("bad\nvalue".into()), "bad value");
    }
}
