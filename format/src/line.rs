//! Writing one record as one JSON line, with field names from the vocabulary.
//!
//! The capture library formats every kernel launch of the user's program with this, so it appends to a
//! `String` the caller reuses, formats integers with `itoa` and hex by hand (`write!` costs several times more),
//! and never allocates.

use crate::vocabulary::{AccessFlag, Field, RecordKind};

/// One record being appended to `out`: `begin` writes `{"type":"kind"`, each field call appends `,"field":value`,
/// `end` closes the object and the line.
pub struct RecordLine<'a> {
    out: &'a mut String,
}

impl<'a> RecordLine<'a> {
    #[inline]
    pub fn begin(out: &'a mut String, kind: RecordKind) -> RecordLine<'a> {
        out.push_str("{\"type\":\"");
        out.push_str(kind.as_str());
        out.push('"');
        RecordLine { out }
    }

    /// Closes the record and its line.
    #[inline]
    pub fn end(self) {
        self.out.push_str("}\n");
    }

    #[inline]
    pub fn number(&mut self, field: Field, value: impl itoa::Integer) -> &mut Self {
        self.out.push_str(field.key());
        push_number(self.out, value);
        self
    }

    #[inline]
    pub fn boolean(&mut self, field: Field, value: bool) -> &mut Self {
        self.out.push_str(field.key());
        self.out.push_str(if value { "true" } else { "false" });
        self
    }

    /// An address, as a hex string.
    #[inline]
    pub fn address(&mut self, field: Field, value: u64) -> &mut Self {
        self.out.push_str(field.key());
        push_address(self.out, value);
        self
    }

    /// A byte range `[address, size]`.
    #[inline]
    pub fn range(&mut self, field: Field, address: u64, size: u64) -> &mut Self {
        self.out.push_str(field.key());
        self.out.push('[');
        push_address(self.out, address);
        self.out.push(',');
        push_number(self.out, size);
        self.out.push(']');
        self
    }

    /// A string, escaped for JSON.
    #[inline]
    pub fn string(&mut self, field: Field, text: &str) -> &mut Self {
        self.out.push_str(field.key());
        self.out.push('"');
        push_escaped(self.out, text);
        self.out.push('"');
        self
    }

    /// A string that needs no escaping: a vocabulary name (`as_str` of an enum of this crate), an API name, or
    /// text the caller escaped once with [`push_escaped`] (a kernel name written for every launch).
    #[inline]
    pub fn name(&mut self, field: Field, text: &str) -> &mut Self {
        self.out.push_str(field.key());
        self.out.push('"');
        self.out.push_str(text);
        self.out.push('"');
        self
    }

    /// A kernel's pointer arguments: `[[address, "r" | "w"], ...]`.
    #[inline]
    pub fn pointers(&mut self, field: Field, pointers: impl IntoIterator<Item = (u64, AccessFlag)>) -> &mut Self {
        self.out.push_str(field.key());
        self.out.push('[');
        for (i, (address, flag)) in pointers.into_iter().enumerate() {
            self.out.push_str(if i > 0 { ",[" } else { "[" });
            push_address(self.out, address);
            self.out.push_str(match flag {
                AccessFlag::Read => ",\"r\"]",
                AccessFlag::Write => ",\"w\"]",
            });
        }
        self.out.push(']');
        self
    }

    /// A list of numbers (handles): `[1, 2, ...]`.
    #[inline]
    pub fn numbers(&mut self, field: Field, values: impl IntoIterator<Item = u64>) -> &mut Self {
        self.out.push_str(field.key());
        self.out.push('[');
        for (i, value) in values.into_iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            push_number(self.out, value);
        }
        self.out.push(']');
        self
    }

    /// A list of addresses: `["0x...", ...]` (a call site's frames).
    #[inline]
    pub fn addresses(&mut self, field: Field, addresses: impl IntoIterator<Item = u64>) -> &mut Self {
        self.out.push_str(field.key());
        self.out.push('[');
        for (i, address) in addresses.into_iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            push_address(self.out, address);
        }
        self.out.push(']');
        self
    }

    /// A list of byte runs: a single run as `[address, size]`, a periodic one as the strided view that covers
    /// exactly its bytes (`[address, extent, element size, [[count, step], [run, 1]]]`, docs/trace-format.md).
    #[inline]
    pub fn runs(&mut self, field: Field, runs: impl IntoIterator<Item = ByteRuns>) -> &mut Self {
        self.out.push_str(field.key());
        self.out.push('[');
        for (i, run) in runs.into_iter().enumerate() {
            self.out.push_str(if i > 0 { ",[" } else { "[" });
            push_address(self.out, run.first);
            self.out.push(',');
            if run.count <= 1 {
                push_number(self.out, run.len);
            } else {
                let (element, [(count, step), (len, one)]) = run.view();
                push_number(self.out, run.extent());
                self.out.push(',');
                push_number(self.out, element);
                self.out.push_str(",[[");
                push_number(self.out, count);
                self.out.push(',');
                push_number(self.out, step);
                self.out.push_str("],[");
                push_number(self.out, len);
                self.out.push(',');
                push_number(self.out, one);
                self.out.push_str("]]");
            }
            self.out.push(']');
        }
        self.out.push(']');
        self
    }

    /// A `reads` or `writes` list of plain ranges and strided views (element size, `[size, stride]` per
    /// dimension): `[[address, size], [address, extent, element size, [[size, stride], ...]], ...]`.
    pub fn accesses<'v>(
        &mut self,
        field: Field,
        items: impl IntoIterator<Item = (u64, u64, Option<(u64, &'v [(u64, u64)])>)>,
    ) -> &mut Self {
        self.out.push_str(field.key());
        self.out.push('[');
        for (i, (address, len, view)) in items.into_iter().enumerate() {
            self.out.push_str(if i > 0 { ",[" } else { "[" });
            push_address(self.out, address);
            self.out.push(',');
            push_number(self.out, len);
            if let Some((element, dims)) = view {
                self.out.push(',');
                push_number(self.out, element);
                self.out.push_str(",[");
                for (j, (size, stride)) in dims.iter().enumerate() {
                    self.out.push_str(if j > 0 { ",[" } else { "[" });
                    push_number(self.out, *size);
                    self.out.push(',');
                    push_number(self.out, *stride);
                    self.out.push(']');
                }
                self.out.push(']');
            }
            self.out.push(']');
        }
        self.out.push(']');
        self
    }

    /// A list of byte ranges: `[[address, size], ...]`.
    #[inline]
    pub fn ranges(&mut self, field: Field, ranges: impl IntoIterator<Item = (u64, u64)>) -> &mut Self {
        self.out.push_str(field.key());
        self.out.push('[');
        for (i, (address, size)) in ranges.into_iter().enumerate() {
            self.out.push_str(if i > 0 { ",[" } else { "[" });
            push_address(self.out, address);
            self.out.push(',');
            push_number(self.out, size);
            self.out.push(']');
        }
        self.out.push(']');
        self
    }
}

/// `count` runs of `len` bytes, `step` bytes apart, from `first` (one run: `count` 1, `step` unused): how the
/// exact-access capture writes what a kernel touched, a strided access pattern in one item.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ByteRuns {
    pub first: u64,
    pub len: u64,
    pub step: u64,
    pub count: u64,
}

impl ByteRuns {
    /// From the first byte of the first run to one past the last byte of the last.
    pub fn extent(&self) -> u64 {
        self.step.saturating_mul(self.count.saturating_sub(1)).saturating_add(self.len)
    }

    /// The strided view of exactly these bytes (several runs): the element size and `[size, stride]` per
    /// dimension, `count` runs `step` apart of `len` bytes each, in elements.
    pub fn view(&self) -> (u64, [(u64, u64); 2]) {
        let element = gcd(self.len, self.step);
        (element, [(self.count, self.step / element), (self.len / element, 1)])
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

/// Decimal digits of an integer.
#[inline]
pub fn push_number(out: &mut String, value: impl itoa::Integer) {
    out.push_str(itoa::Buffer::new().format(value));
}

/// An address as a JSON string, "0x" and lower-case hex digits.
#[inline]
pub fn push_address(out: &mut String, value: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut start = digits.len();
    let mut rest = value;
    loop {
        start -= 1;
        digits[start] = DIGITS[(rest & 0xf) as usize];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    out.push_str("\"0x");
    out.extend(digits[start..].iter().map(|&d| d as char));
    out.push('"');
}

/// Each byte's value as a hex digit, or 16 where it is none.
static HEX_DIGITS: [u8; 256] = {
    let mut table = [16u8; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = match byte as u8 {
            b @ b'0'..=b'9' => b - b'0',
            b @ b'a'..=b'f' => b - b'a' + 10,
            b @ b'A'..=b'F' => b - b'A' + 10,
            _ => 16,
        };
        byte += 1;
    }
    table
};

/// An address as the JSON format writes it in a string, strictly: `0x` and hex digits (`_` may separate them),
/// or decimal digits. No sign, no space, nothing empty: Rust's integer parsing alone takes `"+10"`, and
/// `"0x+10"` as 16. Every address of a JSON trace goes through here.
pub fn parse_address(text: &str) -> Option<u64> {
    // Nearly every address is `0x` and at most 16 hex digits: a table look-up per digit, and no overflow.
    if let [b'0', b'x' | b'X', digits @ ..] = text.as_bytes() {
        if !digits.is_empty() && digits.len() <= 16 {
            let mut value: u64 = 0;
            let plain = digits.iter().all(|&byte| {
                let digit = HEX_DIGITS[byte as usize];
                value = value << 4 | u64::from(digit);
                digit < 16
            });
            if plain {
                return Some(value);
            }
        }
    }
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex.as_bytes(), 16),
        None => (text.as_bytes(), 10),
    };
    // One pass: every address of a trace goes through here.
    let mut value: u64 = 0;
    let mut seen_digit = false;
    for &byte in digits {
        let digit = match byte {
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' if radix == 16 => byte - b'a' + 10,
            b'A'..=b'F' if radix == 16 => byte - b'A' + 10,
            b'_' if radix == 16 && seen_digit => continue,
            _ => return None,
        };
        seen_digit = true;
        value = value.checked_mul(radix)?.checked_add(u64::from(digit))?;
    }
    seen_digit.then_some(value)
}

/// JSON string contents: kernel names can hold quotes or backslashes in template arguments, and file names
/// anything.
#[inline]
pub fn push_escaped(out: &mut String, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4] as char);
                out.push(HEX[(c as usize) & 0xf] as char);
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_addresses_format_as_the_standard_formatter_would() {
        for value in [0u64, 1, 9, 10, 0xabc, 0x7f00_1234_5678, u64::MAX] {
            let (mut address, mut number) = (String::new(), String::new());
            push_address(&mut address, value);
            push_number(&mut number, value);
            assert_eq!(address, format!("\"{value:#x}\""));
            assert_eq!(number, value.to_string());
        }
    }

    #[test]
    fn escapes_quotes_backslashes_and_control_characters() {
        let mut out = String::new();
        push_escaped(&mut out, "k<\"x\\y\">\n\u{1b}é");
        assert_eq!(out, "k<\\\"x\\\\y\\\">\\u000a\\u001bé");
    }

    #[test]
    fn a_record_line() {
        let mut out = String::new();
        let mut line = RecordLine::begin(&mut out, RecordKind::Kernel);
        line.number(Field::Stream, 7u64)
            .string(Field::Name, "k")
            .pointers(Field::Pointers, [(0x10, AccessFlag::Read), (0x20, AccessFlag::Write)])
            .range(Field::To, 0x40, 8)
            .boolean(Field::Sync, true);
        line.end();
        assert_eq!(
            out,
            "{\"type\":\"kernel\",\"stream\":7,\"name\":\"k\",\"pointers\":[[\"0x10\",\"r\"],[\"0x20\",\"w\"]],\"to\":[\"0x40\",8],\"sync\":true}\n"
        );
        out.clear();
        let mut line = RecordLine::begin(&mut out, RecordKind::Callsite);
        line.number(Field::Id, 1u32).addresses(Field::Frames, [0x401a2b, 0x7f00]);
        line.end();
        assert_eq!(out, "{\"type\":\"callsite\",\"id\":1,\"frames\":[\"0x401a2b\",\"0x7f00\"]}\n");
    }

    #[test]
    fn a_periodic_run_is_the_strided_view_of_exactly_its_bytes() {
        let mut out = String::new();
        let mut line = RecordLine::begin(&mut out, RecordKind::Kernel);
        let single = ByteRuns { first: 0x1000, len: 4096, step: 0, count: 1 };
        let every_other = ByteRuns { first: 0x2000, len: 32, step: 64, count: 4 };
        line.runs(Field::Writes, [single, every_other]);
        line.end();
        // Four 32-byte runs 64 bytes apart: 32-byte elements, 4 of them with a stride of 2, each one element.
        assert_eq!(out, "{\"type\":\"kernel\",\"writes\":[[\"0x1000\",4096],[\"0x2000\",224,32,[[4,2],[1,1]]]]}\n");
        assert_eq!(every_other.extent(), 3 * 64 + 32);
        assert_eq!(gcd(96, 64), 32);
    }
}
