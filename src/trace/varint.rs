//! LEB128 integers (zigzag for signed ones), read with bounds checks.

/// Appends `value` in 7-bit groups, low first.
pub fn put_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Zigzag: small magnitudes of either sign take few bytes.
pub fn put_signed(out: &mut Vec<u8>, value: i64) {
    put_unsigned(out, zigzag(value));
}

/// Heap addresses are 16-byte aligned: a difference of two in units of 16 (the low bit 0),
/// anything else as 1 and then the difference whole.
pub fn put_aligned(out: &mut Vec<u8>, value: i64) {
    match value % ALIGNMENT {
        0 => put_unsigned(out, zigzag(value / ALIGNMENT) << 1),
        _ => {
            put_unsigned(out, 1);
            put_signed(out, value);
        }
    }
}

const ALIGNMENT: i64 = 16;

/// A signed value as an unsigned one, small magnitudes first: 0, -1, 1, -2 ...
pub fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

pub fn unzigzag(value: u64) -> i64 {
    (value >> 1) as i64 ^ -((value & 1) as i64)
}

/// Reads from a slice; running past its end or a varint longer than 64 bits is an error.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, position: 0 }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.position
    }

    pub fn byte(&mut self) -> Result<u8, String> {
        let byte = *self
            .bytes
            .get(self.position)
            .ok_or("a record runs past its block")?;
        self.position += 1;
        Ok(byte)
    }

    pub fn unsigned(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                break;
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("an integer longer than 64 bits".to_string())
    }

    /// A value written by `put_aligned`.
    pub fn aligned(&mut self) -> Result<i64, String> {
        match self.unsigned()? {
            1 => self.signed(),
            value if value & 1 == 0 => Ok(unzigzag(value >> 1).wrapping_mul(ALIGNMENT)),
            value => Err(format!("an address difference tagged {value}")),
        }
    }

    pub fn signed(&mut self) -> Result<i64, String> {
        Ok(unzigzag(self.unsigned()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_at_their_edges() {
        let unsigned = [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
        let signed = [0, -1, 1, -64, 64, i64::MIN, i64::MAX];
        let mut bytes = Vec::new();
        unsigned
            .iter()
            .for_each(|&value| put_unsigned(&mut bytes, value));
        signed
            .iter()
            .for_each(|&value| put_signed(&mut bytes, value));
        let mut cursor = Cursor::new(&bytes);
        for value in unsigned {
            assert_eq!(cursor.unsigned(), Ok(value));
        }
        for value in signed {
            assert_eq!(cursor.signed(), Ok(value));
        }
        assert_eq!(cursor.position(), bytes.len());
        assert!(cursor.byte().is_err());
    }

    #[test]
    fn aligned_differences_take_fewer_bytes_and_others_round_trip() {
        let values = [
            0,
            16,
            -16,
            0x7f0,
            0x800,
            24,
            -8,
            i64::MIN,
            i64::MAX,
            -(1 << 62),
        ];
        let mut bytes = Vec::new();
        values
            .iter()
            .for_each(|&value| put_aligned(&mut bytes, value));
        let mut cursor = Cursor::new(&bytes);
        for value in values {
            assert_eq!(cursor.aligned(), Ok(value));
        }
        assert_eq!(cursor.position(), bytes.len());
        let mut bytes = Vec::new();
        put_aligned(&mut bytes, 0x7f0);
        assert_eq!(
            bytes,
            [0xfc, 0x03],
            "127 units of 16: zigzag 254, shifted: 508"
        );
        put_aligned(&mut bytes, 24);
        assert_eq!(bytes[2..], [1, 48], "unaligned: the marker, then zigzag 48");
        assert!(
            Cursor::new(&[3]).aligned().is_err(),
            "an odd tag other than 1"
        );
    }

    #[test]
    fn sizes_in_bytes_are_as_expected() {
        let mut bytes = Vec::new();
        put_unsigned(&mut bytes, 127);
        put_signed(&mut bytes, -64);
        assert_eq!(bytes, [0x7f, 0x7f]);
        put_unsigned(&mut bytes, 128);
        assert_eq!(bytes[2..], [0x80, 0x01]);
    }

    #[test]
    fn overlong_and_short_integers_are_errors() {
        assert!(Cursor::new(&[0xff; 11]).unsigned().is_err());
        assert!(
            Cursor::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02])
                .unsigned()
                .is_err()
        );
        assert!(Cursor::new(&[0x80]).unsigned().is_err());
    }
}
