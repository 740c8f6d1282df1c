//! What the relay does alike over both address families: an address read,
//! written and summed into the UDP checksum (IPv4's 32 bits, IPv6's 128),
//! and the checksum's incremental update after a relay rewrite.

use super::{fold, rd128, rd32, wr128, wr32};

/// An IP address of either family, as the packet carries it (big endian).
pub trait Addr:
    Copy + Ord + std::hash::Hash + Default + std::fmt::Debug + Send + Sync + Into<u128> + 'static
{
    /// Its bits (the longest prefix) and 16-bit words.
    const BITS: u8;
    const WORDS: u32;
    /// The network mask of a prefix `len` bits long (`len` <= BITS).
    fn mask(len: u8) -> Self;
    fn and(self, mask: Self) -> Self;
    fn rd(b: &[u8], off: usize) -> Self;
    fn wr(self, b: &mut [u8], off: usize);
    /// One's-complement sum of its 16-bit words, unfolded.
    fn word_sum(self) -> u32;
}

impl Addr for u32 {
    const BITS: u8 = 32;
    const WORDS: u32 = 2;
    #[inline]
    fn mask(len: u8) -> u32 {
        u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
    }
    #[inline]
    fn and(self, mask: u32) -> u32 {
        self & mask
    }
    #[inline]
    fn rd(b: &[u8], off: usize) -> u32 {
        rd32(b, off)
    }
    #[inline]
    fn wr(self, b: &mut [u8], off: usize) {
        wr32(b, off, self)
    }
    #[inline]
    fn word_sum(self) -> u32 {
        (self >> 16) + (self & 0xffff)
    }
}

impl Addr for u128 {
    const BITS: u8 = 128;
    const WORDS: u32 = 8;
    #[inline]
    fn mask(len: u8) -> u128 {
        u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
    }
    #[inline]
    fn and(self, mask: u128) -> u128 {
        self & mask
    }
    #[inline]
    fn rd(b: &[u8], off: usize) -> u128 {
        rd128(b, off)
    }
    #[inline]
    fn wr(self, b: &mut [u8], off: usize) {
        wr128(b, off, self)
    }
    #[inline]
    fn word_sum(self) -> u32 {
        (0..8).map(|i| u32::from((self >> (i * 16)) as u16)).sum()
    }
}

/// The UDP checksum after a relay rewrite of both addresses and both ports
/// (the pseudo-header's addresses and the header's ports change; its length
/// and next header do not): RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'), every
/// changed word summed before one fold. 0 ("no checksum", IPv4 only: an
/// IPv6 datagram with 0 is never relayed) stays 0; a result of 0 is sent as
/// 0xffff, its one's-complement twin.
#[inline]
pub fn udp_csum_rewrite<A: Addr>(hc: u16, old: (A, A, u16, u16), new: (A, A, u16, u16)) -> u16 {
    if hc == 0 {
        return 0;
    }
    let sum_old = old.0.word_sum() + old.1.word_sum() + u32::from(old.2) + u32::from(old.3);
    let sum_new = new.0.word_sum() + new.1.word_sum() + u32::from(new.2) + u32::from(new.3);
    // ~m summed over the words changed: both addresses and both ports
    let not_old = (2 * A::WORDS + 2) * 0xffff - sum_old;
    match !fold(u32::from(!hc) + not_old + sum_new) {
        0 => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{csum_update16, csum_update32};
    use proptest::prelude::*;

    proptest! {
        /// Over IPv4 the one-fold update is the word-by-word RFC 1624 chain
        /// (whose result 0 is sent as 0xffff).
        #[test]
        fn the_v4_update_is_the_word_by_word_chain(hc in 1u16.., a in any::<u32>(), b in any::<u32>(),
                c in any::<u32>(), d in any::<u32>(), p in any::<u16>(), q in any::<u16>(),
                r in any::<u16>(), s in any::<u16>()) {
            let mut w = csum_update32(hc, a, c);
            w = csum_update32(w, b, d);
            w = csum_update16(w, p, r);
            w = csum_update16(w, q, s);
            let w = if w == 0 { 0xffff } else { w };
            let one = udp_csum_rewrite(hc, (a, b, p, q), (c, d, r, s));
            prop_assert_eq!(one, w);
        }
    }

    #[test]
    fn masks_of_every_length() {
        assert_eq!(u32::mask(0), 0);
        assert_eq!(u32::mask(24), 0xffff_ff00);
        assert_eq!(u32::mask(32), u32::MAX);
        assert_eq!(u128::mask(0), 0);
        assert_eq!(u128::mask(1), 1 << 127);
        assert_eq!(u128::mask(128), u128::MAX);
    }

    #[test]
    fn no_checksum_stays_none() {
        assert_eq!(udp_csum_rewrite(0, (1u32, 2, 3, 4), (5, 6, 7, 8)), 0);
    }
}
