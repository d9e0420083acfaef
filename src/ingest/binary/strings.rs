//! The string table of a binary trace as its reader holds it: what each declared index names, looked up for
//! the records that name it.

use std::borrow::Cow;
use std::sync::Arc;

use streamtrace_format::binary::read::DecodeError;
use streamtrace_format::Field;

/// The strings declared so far, each shared by the names taken from it; None for one that was not UTF-8 (a
/// record naming it is malformed).
pub(super) type Strings = Vec<Option<Arc<str>>>;

/// The text string `index` names, as the value of `field`; an error naming the field when it was never
/// declared or is not UTF-8.
#[inline]
pub(super) fn text(strings: &Strings, index: u32, field: Field) -> Result<&Arc<str>, DecodeError> {
    match strings.get(index as usize) {
        Some(Some(text)) => Ok(text),
        _ => Err(not_text(strings, index, field)),
    }
}

/// Why string `index` is not text: [`text`]'s error, out of its way.
#[cold]
fn not_text(strings: &Strings, index: u32, field: Field) -> DecodeError {
    match strings.get(index as usize) {
        Some(_) => wrong(field, format!("string {index} is not UTF-8")),
        None => wrong(field, format!("string {index} was never declared")),
    }
}

/// What is wrong with the value of `field`, found after it was read.
pub(super) fn wrong(field: Field, message: impl Into<Cow<'static, str>>) -> DecodeError {
    DecodeError { at: 0, field: Some(field), message: message.into().into_owned() }
}
