//! Where in the program's source something was issued or allocated. Plain values, no I/O; the model's other
//! files build on it and it depends on none of them.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

/// Where in the program's source an operation was issued.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct SourceLocation {
    pub file: Arc<str>,
    pub line: Option<u32>,
}

impl SourceLocation {
    /// Parses `file:line` (or a bare `file`).
    pub fn parse(text: &str) -> SourceLocation {
        match text.rsplit_once(':') {
            Some((file, line)) if !file.is_empty() => match line.parse() {
                Ok(line) => SourceLocation { file: file.into(), line: Some(line) },
                Err(_) => SourceLocation { file: text.into(), line: None },
            },
            _ => SourceLocation { file: text.into(), line: None },
        }
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}", self.file, line),
            None => write!(f, "{}", self.file),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_location_parses_line() {
        let loc = SourceLocation::parse("train.py:12");
        assert_eq!(&*loc.file, "train.py");
        assert_eq!(loc.line, Some(12));
        assert_eq!(SourceLocation::parse("weird").line, None);
        assert_eq!(SourceLocation::parse("C:/x.cu:7").line, Some(7));
    }
}
