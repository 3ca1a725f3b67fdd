//! The control protocol's requests: one line each.

/// A request from `schedhost ctl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `swap POLICY`: a path, a bundled name or native:NAME.
    Swap(String),
    /// `set NAME=VALUE`.
    Set(String, i64),
    /// `get`.
    Get,
    /// `status`.
    Status,
    /// `stats`.
    Stats,
    /// `groups`: every group's limits and what it did.
    Groups,
    /// `group NAME:KEY=VALUE,…`: the keys of a group to change, in `--group`'s words;
    /// the others keep their values.
    Group(crate::value::GroupEdit),
}

/// Parses one request line.
///
/// # Errors
/// A message saying what a valid line looks like.
pub fn parse_request(line: &str) -> Result<Request, String> {
    let (verb, rest) = line
        .split_once(char::is_whitespace)
        .map_or((line, ""), |(v, r)| (v, r.trim()));
    match (verb, rest) {
        ("swap", policy) if !policy.is_empty() => Ok(Request::Swap(policy.to_owned())),
        ("set", setting) => {
            let (name, value) = setting
                .split_once('=')
                .ok_or_else(|| format!("set {setting}: expected set NAME=VALUE"))?;
            let value = value
                .trim()
                .parse()
                .map_err(|_| format!("set {setting}: {value} is not an integer"))?;
            Ok(Request::Set(name.trim().to_owned(), value))
        }
        ("get", "") => Ok(Request::Get),
        ("status", "") => Ok(Request::Status),
        ("stats", "") => Ok(Request::Stats),
        ("groups", "") => Ok(Request::Groups),
        ("group", spec) => crate::value::parse_group_edit(spec).map(Request::Group),
        _ => Err(format!(
            "unknown request {line:?}: swap POLICY, set NAME=VALUE, get, status, stats, groups or group NAME:KEY=VALUE,…"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_requests_parse_and_bad_ones_say_what_is_valid() {
        assert_eq!(parse_request("swap cfq"), Ok(Request::Swap("cfq".into())));
        assert_eq!(
            parse_request("set fifo_batch=8"),
            Ok(Request::Set("fifo_batch".into(), 8))
        );
        assert_eq!(parse_request("status"), Ok(Request::Status));
        assert!(parse_request("swap").unwrap_err().contains("swap POLICY"));
        assert!(
            parse_request("set x=y")
                .unwrap_err()
                .contains("not an integer")
        );
        assert!(
            parse_request("reboot")
                .unwrap_err()
                .contains("unknown request")
        );
        assert_eq!(parse_request("groups"), Ok(Request::Groups));
        let Ok(Request::Group(edit)) = parse_request("group a:riops=10") else {
            panic!("a group request")
        };
        let base = crate::core::GroupSpec {
            name: "a".into(),
            wiops: Some(7),
            ..Default::default()
        };
        let limits = edit.apply(&base).unwrap();
        assert_eq!(
            (limits.name.as_str(), limits.riops, limits.wiops),
            ("a", Some(10), Some(7)),
            "the keys not given keep their values"
        );
        assert!(
            parse_request("group a:iops=1")
                .unwrap_err()
                .contains("unknown key")
        );
    }
}
