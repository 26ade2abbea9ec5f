//! A count-min sketch of recent insertions (4-bit counters, four per key, all in one 64-bit word so that a lookup
//! touches one cache line), halved every `reset` insertions so that it forgets: it tells the policy how often a key
//! was inserted lately, i.e. how often it missed, over a window much longer than the ghost's. It is updated only by
//! writes, under the shard's write lock, so the read path is unchanged.

pub struct Sketch {
    words: Vec<u64>,
    additions: usize,
    reset: usize,
}

const LOW_BITS: u64 = 0x7777_7777_7777_7777;

impl Sketch {
    /// A sketch with `counters` 4-bit counters (rounded up to a power of two, at least 64), halved every `reset`
    /// insertions.
    pub fn new(counters: usize, reset: usize) -> Sketch {
        let words = (counters.max(64) / 16).next_power_of_two();
        Sketch { words: vec![0; words], additions: 0, reset: reset.max(16) }
    }

    pub fn counters(&self) -> usize {
        self.words.len() * 16
    }

    /// The word and the four counter positions (0..16) for `hash`, from bits the table and the ghost do not favour.
    fn place(&self, hash: u64) -> (usize, [u32; 4]) {
        let h = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
        let word = (h as usize) & (self.words.len() - 1);
        let bits = h >> 40;
        let mut at = [0u32; 4];
        for (i, slot) in at.iter_mut().enumerate() {
            // Counter i lives in nibbles 4i..4i+4 of the word's 16: one per quarter, so the four never coincide.
            *slot = (4 * i as u32) + ((bits >> (2 * i)) & 3) as u32;
        }
        (word, at)
    }

    /// How many times `hash` was inserted recently (0..=15, an over-estimate only through collisions).
    pub fn estimate(&self, hash: u64) -> u8 {
        let (word, at) = self.place(hash);
        let w = self.words[word];
        at.iter().map(|&c| ((w >> (4 * c)) & 15) as u8).min().unwrap_or(0)
    }

    /// Counts one insertion of `hash` (conservative update: only the smallest counters grow).
    pub fn increment(&mut self, hash: u64) {
        let (word, at) = self.place(hash);
        let w = self.words[word];
        let min = at.iter().map(|&c| (w >> (4 * c)) & 15).min().unwrap_or(0);
        if min < 15 {
            let mut add = 0u64;
            for &c in &at {
                if (w >> (4 * c)) & 15 == min {
                    add |= 1 << (4 * c);
                }
            }
            self.words[word] = w + add;
        }
        self.additions += 1;
        if self.additions >= self.reset {
            for w in &mut self.words {
                *w = (*w >> 1) & LOW_BITS;
            }
            self.additions /= 2;
        }
    }

    pub fn clear(&mut self) {
        self.words.fill(0);
        self.additions = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::Sketch;

    fn hash(i: u64) -> u64 {
        i.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ (i >> 7)
    }

    #[test]
    fn counts_insertions_and_forgets_them_by_halving() {
        let mut sketch = Sketch::new(4096, 1 << 20);
        for _ in 0..3 {
            sketch.increment(hash(1));
        }
        sketch.increment(hash(2));
        assert_eq!(sketch.estimate(hash(1)), 3);
        assert_eq!(sketch.estimate(hash(2)), 1);
        let strangers = (1000..2000).filter(|&i| sketch.estimate(hash(i)) > 0).count();
        assert!(strangers < 10, "{strangers} of 1000 never-inserted keys counted");
        let mut small = Sketch::new(64, 100);
        for _ in 0..8 {
            small.increment(hash(7));
        }
        for i in 0..200 {
            small.increment(hash(10_000 + i));
        }
        assert!(small.estimate(hash(7)) <= 2, "two halvings: {}", small.estimate(hash(7)));
    }

    #[test]
    fn counters_saturate_at_fifteen() {
        let mut sketch = Sketch::new(64, usize::MAX);
        for _ in 0..40 {
            sketch.increment(hash(3));
        }
        assert_eq!(sketch.estimate(hash(3)), 15);
    }
}
