//! The random numbers of the chaos and of the workers' choices.

use std::time::{SystemTime, UNIX_EPOCH};

/// xorshift64*, seeded from the clock: chaos needs no cryptography.
pub struct Rng(u64);

impl Rng {
    pub fn seeded(salt: u64) -> Rng {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut z = nanos ^ (u64::from(std::process::id()) << 32) ^ salt.wrapping_mul(0x9e37_79b9);
        // splitmix64 finalizer, so that close seeds diverge at once.
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    pub fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}
