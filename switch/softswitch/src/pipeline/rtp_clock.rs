//! `MsClock` and `RtpClock` (switch/p4/controls/rtp_clock.p4): the time bases
//! the pipeline stamps registers with, from a packet's ns timestamp (wall
//! clock here: ns since the Unix epoch). Both wrap at 2^32. Tofino
//! approximates the divisions with shifted copies (-0.16 %, -0.17 %); here
//! they are exact, as in the XDP fast path, which computes the RTP clock
//! without a 128-bit product (`quality_update` in bpf/fastpath.bpf.c), equal
//! to this one mod 2^32.

const NS_PER_S: u64 = 1_000_000_000;
const NS_PER_MS: u64 = 1_000_000;

/// `MsClock`: ms, mod 2^32 (idle timers, `rtp_last_seen`, reroute and INT
/// report times).
#[inline]
pub fn ms_clock(now_ns: u64) -> u32 {
    (now_ns / NS_PER_MS) as u32
}

/// `RtpClock`: the time in units of an RTP clock of `hz`, mod 2^32 (arrival
/// times for transit and jitter, in the codec's clock).
#[inline]
pub fn rtp_clock(now_ns: u64, hz: u64) -> u32 {
    ((u128::from(now_ns) * u128::from(hz)) / u128::from(NS_PER_S)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ms_clock_counts_ms_and_wraps_at_2_32() {
        assert_eq!(ms_clock(0), 0);
        assert_eq!(ms_clock(999_999), 0);
        assert_eq!(ms_clock(1_000_000), 1);
        assert_eq!(
            ms_clock(1_700_000_000_123_456_789),
            (1_700_000_000_123u64 % (1 << 32)) as u32
        );
        // 2^32 ms (49.7 days) is 0 again
        assert_eq!(ms_clock((1u64 << 32) * NS_PER_MS), 0);
        assert_eq!(ms_clock(((1u64 << 32) + 5) * NS_PER_MS), 5);
    }

    #[test]
    fn rtp_clock_ticks_at_the_codec_rate() {
        // 8 kHz: 160 units per 20 ms packet, 8000 per second
        assert_eq!(rtp_clock(20_000_000, 8000), 160);
        assert_eq!(rtp_clock(NS_PER_S, 8000), 8000);
        assert_eq!(rtp_clock(124_999, 8000), 0);
        assert_eq!(rtp_clock(125_000, 8000), 1);
        assert_eq!(rtp_clock(NS_PER_S, 48_000), 48_000);
        // today's wall clock needs more than 64 bits before the division
        let now = 1_700_000_000u64 * NS_PER_S;
        assert_eq!(
            rtp_clock(now, 8000),
            (1_700_000_000u64 * 8000 % (1 << 32)) as u32
        );
    }

    proptest! {
        /// The XDP program's formulation (no 128-bit product) is this one.
        #[test]
        fn the_fast_paths_split_product_agrees(now in any::<u64>(), hz in 1u64..200_000) {
            let split = ((now / NS_PER_S) * hz + ((now % NS_PER_S) * hz) / NS_PER_S) as u32;
            prop_assert_eq!(split, rtp_clock(now, hz));
        }
    }
}
