//! A minimal NumPy `.npy` (format version 1.0) writer for float32 arrays: magic `\x93NUMPY`,
//! version 1.0, a little-endian u16 header length, an ASCII dict header padded with spaces and a
//! newline to a multiple of 64 bytes, then the C-order little-endian data.

use std::io::Write;

/// The `.npy` bytes of a little-endian f32 array of `shape`.
pub fn npy_f32(shape: &[usize], data: &[f32]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape_txt = if dims.len() == 1 {
        format!("({},)", dims.join(""))
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape_txt}, }}");
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.div_ceil(64) * 64 - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 4);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        let _ = out.write_all(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_exact() {
        let b = npy_f32(&[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&b[10..10 + hlen]).expect("ascii");
        assert!(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(header.ends_with('\n'));
        assert_eq!(b.len(), 10 + hlen + 24);
        assert_eq!(&b[10 + hlen + 4..10 + hlen + 8], &1.0f32.to_le_bytes());
        let one = npy_f32(&[4], &[0.0; 4]);
        assert!(std::str::from_utf8(&one[10..70])
            .expect("ascii")
            .contains("(4,)"));
    }
}
