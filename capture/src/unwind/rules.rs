//! How to step from one frame to its caller at one code address: the module's DWARF call frame information
//! (`.eh_frame`, found through `.eh_frame_hdr`'s sorted table) evaluated once with gimli and reduced to the
//! few numbers the unwind loop needs. Only the shapes x86-64 compilers emit at call sites are taken: the CFA
//! at an offset from the stack or frame pointer, the return address just below it, and the caller's frame
//! pointer kept or saved at an offset from the CFA. Anything else ends the unwind there. Pure: reads the byte
//! slices it is given.

// `UnwindSection` provides `EhFrame::cie_from_offset`.
use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, Register, RegisterRule, UnwindContext, UnwindSection,
};

/// DWARF register numbers of x86-64 (System V psABI).
const RBP: Register = Register(6);
const RSP: Register = Register(7);
const RETURN_ADDRESS: Register = Register(16);

/// One step of the unwind at one code address.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The caller's frame: CFA = (frame pointer if `from_bp`, else stack pointer) + `offset`; the return
    /// address at CFA - 8; the caller's frame pointer saved at CFA + `saved_bp` (0: unchanged).
    Step { from_bp: bool, offset: i32, saved_bp: i32 },
    /// The outermost frame (`_start`, a thread's entry): the return address is undefined.
    Bottom,
    /// No rule this unwinder can follow: the unwind stops here.
    Unknown,
}

/// A module's unwind tables as they lie in memory: `.eh_frame_hdr` and `.eh_frame` with their addresses.
pub struct UnwindTables<'a> {
    pub eh_frame_hdr: &'a [u8],
    pub eh_frame_hdr_address: u64,
    /// From the start of `.eh_frame` to the end of the segment that holds it (the section's own end is not
    /// in memory; its entries say where they end).
    pub eh_frame: &'a [u8],
    pub eh_frame_address: u64,
}

/// The address `.eh_frame_hdr` says `.eh_frame` starts at, read from its header.
pub fn eh_frame_address(eh_frame_hdr: &[u8], eh_frame_hdr_address: u64) -> Option<u64> {
    let bases = BaseAddresses::default().set_eh_frame_hdr(eh_frame_hdr_address);
    let header = EhFrameHdr::new(eh_frame_hdr, LittleEndian).parse(&bases, 8).ok()?;
    match header.eh_frame_ptr() {
        gimli::Pointer::Direct(address) => Some(address),
        gimli::Pointer::Indirect(_) => None,
    }
}

/// The rule at code address `address` (a return address less one, or the exact pc of the first frame).
pub fn rule_at(tables: &UnwindTables, address: u64, context: &mut UnwindContext<usize>) -> Rule {
    let bases =
        BaseAddresses::default().set_eh_frame_hdr(tables.eh_frame_hdr_address).set_eh_frame(tables.eh_frame_address);
    let Ok(header) = EhFrameHdr::new(tables.eh_frame_hdr, LittleEndian).parse(&bases, 8) else { return Rule::Unknown };
    let Some(table) = header.table() else { return Rule::Unknown };
    let eh_frame = EhFrame::new(tables.eh_frame, LittleEndian);
    let Ok(fde) = table.fde_for_address(&eh_frame, &bases, address, EhFrame::cie_from_offset) else {
        return Rule::Unknown;
    };
    match fde.unwind_info_for_address(&eh_frame, &bases, context, address) {
        Ok(row) => reduce(row.cfa(), row.register(RETURN_ADDRESS), row.register(RBP)),
        Err(_) => Rule::Unknown,
    }
}

/// The rule a CFI row amounts to, when it has one of the shapes the unwind loop follows.
fn reduce(cfa: &CfaRule<usize>, return_address: RegisterRule<usize>, bp: RegisterRule<usize>) -> Rule {
    match return_address {
        RegisterRule::Undefined => return Rule::Bottom,
        RegisterRule::Offset(-8) => {}
        _ => return Rule::Unknown,
    }
    let (from_bp, offset) = match *cfa {
        CfaRule::RegisterAndOffset { register: RSP, offset } => (false, offset),
        CfaRule::RegisterAndOffset { register: RBP, offset } => (true, offset),
        _ => return Rule::Unknown,
    };
    let saved_bp = match bp {
        RegisterRule::Undefined | RegisterRule::SameValue => 0,
        RegisterRule::Offset(at) if at != 0 => at,
        _ => return Rule::Unknown,
    };
    match (i32::try_from(offset), i32::try_from(saved_bp)) {
        (Ok(offset), Ok(saved_bp)) if offset > 0 => Rule::Step { from_bp, offset, saved_bp },
        _ => Rule::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_site_shapes_reduce_to_steps() {
        let sp = CfaRule::RegisterAndOffset { register: RSP, offset: 48 };
        assert_eq!(
            reduce(&sp, RegisterRule::Offset(-8), RegisterRule::Undefined),
            Rule::Step { from_bp: false, offset: 48, saved_bp: 0 }
        );
        let bp = CfaRule::RegisterAndOffset { register: RBP, offset: 16 };
        assert_eq!(
            reduce(&bp, RegisterRule::Offset(-8), RegisterRule::Offset(-16)),
            Rule::Step { from_bp: true, offset: 16, saved_bp: -16 }
        );
        assert_eq!(reduce(&sp, RegisterRule::Undefined, RegisterRule::Undefined), Rule::Bottom);
        let other = CfaRule::RegisterAndOffset { register: Register(3), offset: 8 };
        assert_eq!(reduce(&other, RegisterRule::Offset(-8), RegisterRule::Undefined), Rule::Unknown);
        assert_eq!(reduce(&sp, RegisterRule::Offset(-16), RegisterRule::Undefined), Rule::Unknown);
        assert_eq!(reduce(&sp, RegisterRule::Offset(-8), RegisterRule::Register(Register(3))), Rule::Unknown);
    }
}
