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
    put_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
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

    pub fn signed(&mut self) -> Result<i64, String> {
        let value = self.unsigned()?;
        Ok((value >> 1) as i64 ^ -((value & 1) as i64))
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
