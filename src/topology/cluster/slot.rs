//! Redis Cluster key slots: CRC16/XMODEM of the key's hash tag, modulo
//! 16384 (the rule of Redis's `keyHashSlot`, not Redisson's `calcSlot`,
//! which takes the first `}` anywhere in the key).

/// The number of hash slots in a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// CRC16/XMODEM (polynomial 0x1021, initial value 0, no reflection), the
/// checksum Redis Cluster hashes keys with. Bitwise: keys are short, and a
/// 512-byte table buys nothing measurable next to a round trip.
pub(crate) fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: the text between the first `{` and
/// the first `}` after it, if that is not empty; otherwise the whole key.
pub(crate) fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(close) = rest.iter().position(|&b| b == b'}')
            && close > 0
        {
            return &rest[..close];
        }
    }
    key
}

/// The Redis Cluster hash slot of `key` (0 to 16383), as the server's
/// `CLUSTER KEYSLOT` computes it: CRC16/XMODEM of the key's hash tag (the
/// text between the first `{` and the next `}`, if not empty), else of the
/// whole key. Every key a lock named `name` uses lies in the slot of
/// `name` unless the name contains a `{` without a complete tag (e.g.
/// `a{b`), which Redisson does not fix either. Pure computation, no I/O.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_xmodem_check_value() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn slots_of_known_keys() {
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{foo}"), 12182);
        assert_eq!(key_slot(b"redisson_lock__channel:{foo}"), 12182);
        assert_eq!(key_slot(b"redisson_unlock_latch:{foo}:abc"), 12182);
        assert_eq!(key_slot(b"redisson_lock_token:{foo}"), 12182);
        // TOPOLOGIES §1.4, checked with CLUSTER KEYSLOT on 7.0.15.
        assert_eq!(key_slot(b"a{b"), 13340);
        assert_eq!(key_slot(b"redisson_lock__channel:a{b"), 3200);
        assert_eq!(key_slot(b"a}b{c}"), 7365);
    }

    #[test]
    fn hash_tag_rule() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"a}b{c}"), b"c");
        assert_eq!(hash_tag(b"no tag"), b"no tag");
    }
}
