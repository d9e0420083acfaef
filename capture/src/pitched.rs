//! The bytes a pitched (2D or 3D) copy or set touches, from the descriptors cuMemcpy2D/3D and cuMemsetD2D take:
//! for each side its first byte, its extent and what memory the descriptor says it is. Plain arithmetic on the
//! descriptor; touches nothing.

use cudarc::driver::sys::{CUmemcpy3DOperand, CUmemcpy3DOperandType};

use crate::params::{Memcpy2D, Memcpy3D, Memcpy3DBatchOp};

/// The bytes from the first to the last a pitched region touches: `depth` slices `slice_rows` rows apart, each
/// `height` rows `pitch` bytes apart, each row `width` bytes (the rows' gaps included: an over-estimate, as the
/// extent of a strided tensor is).
pub fn pitched_extent(pitch: usize, width: u64, height: usize, depth: usize, slice_rows: usize) -> u64 {
    if width == 0 || height == 0 || depth == 0 {
        return 0;
    }
    let rows = (depth as u64 - 1).saturating_mul(slice_rows as u64).saturating_add(height as u64 - 1);
    rows.saturating_mul(pitch as u64).saturating_add(width)
}

/// One side of a pitched (2D or 3D) copy: where its first byte is, and what memory its descriptor says it is
/// (`CU_MEMORYTYPE_HOST` 1, `DEVICE` 2, `ARRAY` 3, `UNIFIED` 4).
pub struct PitchedSide {
    pub memory_type: u32,
    pub host: u64,
    pub device: u64,
    /// The offset of the first byte: x + (z * slice rows + y) * pitch.
    pub offset: u64,
    pub extent: u64,
}

/// A pitched copy as the capture records it.
pub struct PitchedCopyShape {
    pub src: PitchedSide,
    pub dst: PitchedSide,
}

impl PitchedCopyShape {
    pub fn of_2d(c: &Memcpy2D) -> PitchedCopyShape {
        let side = |memory_type, host, device, x: usize, y: usize, pitch: usize| PitchedSide {
            memory_type,
            host,
            device,
            offset: (x as u64).saturating_add((y as u64).saturating_mul(pitch as u64)),
            extent: pitched_extent(pitch, c.WidthInBytes as u64, c.Height, 1, 0),
        };
        PitchedCopyShape {
            src: side(c.srcMemoryType, c.srcHost as u64, c.srcDevice, c.srcXInBytes, c.srcY, c.srcPitch),
            dst: side(c.dstMemoryType, c.dstHost as u64, c.dstDevice, c.dstXInBytes, c.dstY, c.dstPitch),
        }
    }

    pub fn of_3d(c: &Memcpy3D) -> PitchedCopyShape {
        let side =
            |memory_type, host, device, x: usize, y: usize, z: usize, pitch: usize, slice_rows: usize| PitchedSide {
                memory_type,
                host,
                device,
                offset: (x as u64).saturating_add(
                    (z as u64).saturating_mul(slice_rows as u64).saturating_add(y as u64).saturating_mul(pitch as u64),
                ),
                extent: pitched_extent(pitch, c.WidthInBytes as u64, c.Height, c.Depth, slice_rows),
            };
        PitchedCopyShape {
            src: side(
                c.srcMemoryType,
                c.srcHost as u64,
                c.srcDevice,
                c.srcXInBytes,
                c.srcY,
                c.srcZ,
                c.srcPitch,
                c.srcHeight,
            ),
            dst: side(
                c.dstMemoryType,
                c.dstHost as u64,
                c.dstDevice,
                c.dstXInBytes,
                c.dstY,
                c.dstZ,
                c.dstPitch,
                c.dstHeight,
            ),
        }
    }
}

impl PitchedCopyShape {
    /// One operation of cuMemcpy3DBatchAsync: a pointer operand's rows are `rowLength` bytes apart (the
    /// width when 0) and its layers `layerHeight` rows (the height when 0); an array operand has no address.
    pub fn of_3d_operation(op: &Memcpy3DBatchOp) -> PitchedCopyShape {
        let (width, height, depth) = (op.extent.width as u64, op.extent.height, op.extent.depth);
        let side = |operand: &CUmemcpy3DOperand| {
            if operand.type_ != CUmemcpy3DOperandType::CU_MEMCPY_OPERAND_TYPE_POINTER {
                return PitchedSide { memory_type: 3, host: 0, device: 0, offset: 0, extent: 0 };
            }
            // Safety: the operand says it is a pointer, the union's first member.
            let pointer = unsafe { operand.op.ptr };
            let pitch = if pointer.rowLength == 0 { width as usize } else { pointer.rowLength };
            let layer = if pointer.layerHeight == 0 { height } else { pointer.layerHeight };
            // Unified: the capture asks what memory the address is.
            PitchedSide {
                memory_type: 4,
                host: 0,
                device: pointer.ptr,
                offset: 0,
                extent: pitched_extent(pitch, width, height, depth, layer),
            }
        };
        PitchedCopyShape { src: side(&op.src), dst: side(&op.dst) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_run_from_the_first_to_the_last_byte() {
        assert_eq!(pitched_extent(512, 100, 4, 1, 0), 3 * 512 + 100);
        assert_eq!(pitched_extent(512, 100, 4, 3, 8), (2 * 8 + 3) * 512 + 100);
        assert_eq!(pitched_extent(512, 0, 4, 1, 0), 0, "nothing copied, nothing touched");
        assert_eq!(pitched_extent(usize::MAX, 8, usize::MAX, 2, usize::MAX), u64::MAX, "saturates, never wraps");
    }
}
