//! DiskSim's parameter grammar: nested `type NAME { Key = value, … }` blocks, lists in `[ … ]`
//! and `#` comments, parsed into [`Node`]s, and the fields of one block taken one by one.

use super::*;

/// A parsed DiskSim value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    Scalar(String),
    List(Vec<Node>),
    Block {
        kind: String,
        fields: Vec<(String, Node)>,
    },
}

pub(super) fn read(path: &Path) -> Result<String, ImportError> {
    crate::input::read_text(path, crate::input::MAX_CONFIG_BYTES)
        .map_err(|e| fail(path, e.to_string()))
}

/// The fields of one block, taken one by one; what is left is reported.
pub(super) struct Fields<'a> {
    path: &'a Path,
    fields: Vec<(String, Node)>,
}

impl<'a> Fields<'a> {
    pub(super) fn new(path: &'a Path, fields: Vec<(String, Node)>) -> Self {
        Self { path, fields }
    }

    pub(super) fn take_opt(&mut self, key: &str) -> Option<Node> {
        let i = self
            .fields
            .iter()
            .position(|(k, _)| k.eq_ignore_ascii_case(key))?;
        Some(self.fields.remove(i).1)
    }

    /// `key` as a whole number in `min..=max`, if it is there.
    pub(super) fn take_opt_u64(
        &mut self,
        key: &str,
        min: u64,
        max: u64,
    ) -> Result<Option<u64>, ImportError> {
        if !self.fields.iter().any(|(k, _)| k.eq_ignore_ascii_case(key)) {
            return Ok(None);
        }
        self.take_u64(key, min, max).map(Some)
    }

    pub(super) fn take(&mut self, key: &str) -> Result<Node, ImportError> {
        self.take_opt(key)
            .ok_or_else(|| fail(self.path, format!("missing `{key}`")))
    }

    pub(super) fn take_opt_text(&mut self, key: &str) -> Option<String> {
        match self.take_opt(key)? {
            Node::Scalar(s) => Some(s),
            other => Some(format!("{other:?}")),
        }
    }

    pub(super) fn take_text(&mut self, key: &str) -> Result<String, ImportError> {
        match self.take(key)? {
            Node::Scalar(s) => Ok(s),
            _ => Err(fail(self.path, format!("`{key}` is not a plain value"))),
        }
    }

    pub(super) fn take_f64(&mut self, key: &str, min: f64, max: f64) -> Result<f64, ImportError> {
        let text = self.take_text(key)?;
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && (min..=max).contains(&v) => Ok(v),
            _ => Err(fail(
                self.path,
                format!("`{key} = {text}`: expected a number from {min} to {max}"),
            )),
        }
    }

    /// An optional number, 0 when absent.
    pub(super) fn take_opt_f64(
        &mut self,
        key: &str,
        min: f64,
        max: f64,
    ) -> Result<f64, ImportError> {
        if self.fields.iter().any(|(k, _)| k.eq_ignore_ascii_case(key)) {
            self.take_f64(key, min, max)
        } else {
            Ok(0.0)
        }
    }

    /// A list of exactly `n` numbers, each finite.
    /// A list of whole numbers under `count` (positions in a zone), at most
    /// [`MAX_SLIPS`]; none if absent.
    pub(super) fn take_positions(
        &mut self,
        key: &str,
        count: u64,
    ) -> Result<Vec<u64>, ImportError> {
        let path = self.path;
        let bad = || {
            fail(
                path,
                format!("`{key}` must be a list of at most {MAX_SLIPS} positions under {count}"),
            )
        };
        let items = match self.take_opt(key) {
            None => return Ok(Vec::new()),
            Some(Node::List(items)) => items,
            Some(_) => return Err(bad()),
        };
        if items.len() > MAX_SLIPS {
            return Err(bad());
        }
        items
            .iter()
            .map(|item| match item {
                Node::Scalar(v) => v.parse::<u64>().ok().filter(|&n| n < count),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(bad)
    }

    pub(super) fn take_numbers(&mut self, key: &str, n: usize) -> Result<Vec<f64>, ImportError> {
        let path = self.path;
        let bad = || fail(path, format!("`{key}` must be a list of {n} numbers"));
        let Node::List(items) = self.take(key)? else {
            return Err(bad());
        };
        let numbers: Vec<f64> = items
            .iter()
            .map(|item| match item {
                Node::Scalar(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && x.abs() < 1e9),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        if numbers.len() != n {
            return Err(bad());
        }
        Ok(numbers)
    }

    /// A time that DiskSim adds to others, so it may be negative: within a second below zero.
    pub(super) fn take_adjustment_ms(&mut self, key: &str) -> Result<f64, ImportError> {
        self.take_f64(key, -MAX_ADJUSTMENT_MS, 3_600_000.0)
    }

    pub(super) fn take_ms(&mut self, key: &str) -> Result<f64, ImportError> {
        // (A duration; adjustments that may be negative are taken with their own bounds.)
        self.take_f64(key, 0.0, 3_600_000.0)
    }

    pub(super) fn take_u64(&mut self, key: &str, min: u64, max: u64) -> Result<u64, ImportError> {
        let text = self.take_text(key)?;
        match text.parse::<f64>() {
            Ok(v) if v.fract() == 0.0 && v >= min as f64 && v <= max as f64 => Ok(v as u64),
            _ => Err(fail(
                self.path,
                format!("`{key} = {text}`: expected a whole number from {min} to {max}"),
            )),
        }
    }

    pub(super) fn take_opt_block(&mut self, key: &str) -> Option<Fields<'a>> {
        match self.take_opt(key)? {
            Node::Block { fields, .. } => Some(Fields::new(self.path, fields)),
            _ => None,
        }
    }

    pub(super) fn take_block(&mut self, key: &str) -> Result<Fields<'a>, ImportError> {
        let path = self.path;
        self.take_opt_block(key)
            .ok_or_else(|| fail(path, format!("missing block `{key}`")))
    }

    /// A file named by `key`, relative to this file's directory.
    pub(super) fn take_path(&mut self, key: &str) -> Result<PathBuf, ImportError> {
        let name = self.take_text(key)?;
        Ok(self.path.parent().unwrap_or(Path::new(".")).join(name))
    }

    /// `Model = source FILE`.
    pub(super) fn take_source(&mut self, key: &str) -> Result<PathBuf, ImportError> {
        let text = self.take_text(key)?;
        let Some(name) = text.strip_prefix("source").map(str::trim) else {
            return Err(fail(
                self.path,
                format!("`{key} = {text}`: expected `source FILE`"),
            ));
        };
        Ok(self.path.parent().unwrap_or(Path::new(".")).join(name))
    }

    /// Reports every field not taken whose value is not zero.
    pub(super) fn rest(self, notes: &mut Vec<String>, within: &str) {
        for (key, value) in self.fields {
            match value {
                Node::Scalar(v) if v.parse::<f64>().is_ok_and(|x| x == 0.0) => {}
                other => notes.push(format!("{within}: {key} = {}", other.as_written())),
            }
        }
    }
}

impl Node {
    /// The value as a parameter file writes it, for a note: a list as `[ a, b ]`, a block
    /// by its type.
    fn as_written(&self) -> String {
        match self {
            Node::Scalar(v) => v.clone(),
            Node::List(items) => {
                let items: Vec<String> = items.iter().map(Node::as_written).collect();
                format!("[ {} ]", items.join(", "))
            }
            Node::Block { kind, .. } => format!("{kind} {{ … }}"),
        }
    }
}

/// A top-level block: its type, its name and its fields.
type TopBlock = (String, String, Vec<(String, Node)>);

/// The first `kind NAME { … }` block of a file.
pub(super) fn first_block(path: &Path, text: &str) -> Result<TopBlock, ImportError> {
    let mut p = Parser {
        text: text.as_bytes(),
        at: 0,
    };
    let header = p.until(b"{").ok_or_else(|| fail(path, "no `{` block"))?;
    let mut words = header.split_whitespace();
    let kind = words.next().unwrap_or_default().to_owned();
    let name = words.collect::<Vec<_>>().join(" ");
    p.at += 1;
    let fields = p
        .fields(0)
        .map_err(|(at, m)| fail(path, format!("line {}: {m}", line_of(text, at))))?;
    Ok((kind, name, fields))
}

pub(super) fn line_of(text: &str, at: usize) -> usize {
    1 + text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

pub(super) struct Parser<'t> {
    pub(super) text: &'t [u8],
    pub(super) at: usize,
}

type ParseResult<T> = Result<T, (usize, String)>;

impl Parser<'_> {
    pub(super) fn skip_space(&mut self) {
        while self.at < self.text.len() {
            match self.text[self.at] {
                b'#' => {
                    while self.at < self.text.len() && self.text[self.at] != b'\n' {
                        self.at += 1;
                    }
                }
                b if b.is_ascii_whitespace() => self.at += 1,
                _ => break,
            }
        }
    }

    pub(super) fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.get(self.at).copied()
    }

    /// The text up to (not including) the first of `stops`, comments removed.
    pub(super) fn until(&mut self, stops: &[u8]) -> Option<String> {
        let mut out = Vec::new();
        while self.at < self.text.len() {
            let b = self.text[self.at];
            if stops.contains(&b) {
                return Some(String::from_utf8_lossy(&out).trim().to_owned());
            }
            if b == b'#' {
                self.skip_space();
                out.push(b' ');
                continue;
            }
            out.push(b);
            self.at += 1;
        }
        None
    }

    /// `Key = value, …` up to the closing `}`.
    pub(super) fn fields(&mut self, depth: usize) -> ParseResult<Vec<(String, Node)>> {
        self.within_depth(depth)?;
        let mut fields = Vec::new();
        loop {
            match self.peek() {
                None => return Err((self.at, "unclosed `{`".into())),
                Some(b'}') => {
                    self.at += 1;
                    return Ok(fields);
                }
                Some(b',') => self.at += 1,
                Some(_) => {
                    let key = self
                        .until(b"=}")
                        .ok_or((self.at, "unclosed `{`".to_owned()))?;
                    if self.text.get(self.at) != Some(&b'=') {
                        return Err((self.at, format!("`{key}` has no `=`")));
                    }
                    self.at += 1;
                    let value = self.value(depth)?;
                    fields.push((key, value));
                }
            }
        }
    }

    /// Every way in, blocks and lists alike, counts against one depth limit: the parser
    /// recurses, so nesting from the file must never reach the stack's end.
    pub(super) fn within_depth(&self, depth: usize) -> ParseResult<()> {
        if depth > MAX_DEPTH {
            return Err((self.at, format!("nested more than {MAX_DEPTH} deep")));
        }
        Ok(())
    }

    pub(super) fn value(&mut self, depth: usize) -> ParseResult<Node> {
        self.within_depth(depth)?;
        match self.peek() {
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    match self.peek() {
                        None => return Err((self.at, "unclosed `[`".into())),
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Node::List(items));
                        }
                        Some(b',') => self.at += 1,
                        Some(_) => items.push(self.value(depth + 1)?),
                    }
                }
            }
            Some(_) => {
                let start = self.at;
                let text = self.until(b"{,}]\n").unwrap_or_default();
                if self.text.get(self.at) == Some(&b'{') {
                    self.at += 1;
                    let fields = self.fields(depth + 1)?;
                    return Ok(Node::Block { kind: text, fields });
                }
                if text.is_empty() {
                    return Err((start, "a value is missing".into()));
                }
                Ok(Node::Scalar(text))
            }
            None => Err((self.at, "a value is missing".into())),
        }
    }
}
