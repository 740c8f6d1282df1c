//! IPv6 (RFC 8200) beside IPv4: the fixed header, UDP directly after it,
//! and the UDP checksum's incremental update over 128-bit addresses. Like
//! the IPv4 parser, offsets only, every length checked before use.
//!
//! Extension headers are not walked (the Tofino parser extracts only the
//! fixed header): a packet whose next header is not UDP is routed without
//! L4 processing, and a Fragment header (44) marks it a fragment.

use super::family::Addr;
use super::{fold, rd16, Udp, IPPROTO_UDP};

pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// Fixed header length.
pub const HDR_LEN: usize = 40;
pub const NEXT_HEADER_FRAGMENT: u8 = 44;
pub const IPPROTO_ICMPV6: u8 = 58;

/// Why a frame that says IPv6 cannot be routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6Error {
    /// Header cut short, version != 6, or payload length beyond the frame.
    Bad,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed6 {
    /// Offset of the IPv6 header.
    pub l3: usize,
    /// Payload length (the frame may carry Ethernet padding beyond it).
    pub payload_len: usize,
    pub src: u128,
    pub dst: u128,
    pub hop_limit: u8,
    /// The fixed header's next header.
    pub next_header: u8,
    /// Traffic class (DSCP in its upper six bits).
    pub traffic_class: u8,
    /// The next header is a Fragment header: no L4 processing.
    pub fragment: bool,
    /// UDP header right after the fixed header.
    pub udp: Option<Udp>,
}

impl Parsed6 {
    /// End of the IPv6 packet in the frame.
    pub fn end(&self) -> usize {
        self.l3 + HDR_LEN + self.payload_len
    }

    /// DSCP (the traffic class's upper six bits).
    pub fn dscp(&self) -> u8 {
        self.traffic_class >> 2
    }
}

pub use super::{rd128, wr128};

/// The IPv6 header at `l3` (the caller found ethertype 0x86DD there).
pub fn parse_at(frame: &[u8], l3: usize) -> Result<Parsed6, Ipv6Error> {
    let ip = frame.get(l3..).ok_or(Ipv6Error::Bad)?;
    if ip.len() < HDR_LEN || ip[0] >> 4 != 6 {
        return Err(Ipv6Error::Bad);
    }
    let payload_len = usize::from(rd16(ip, 4));
    // a jumbogram (payload length 0 with a Hop-by-Hop option) is not taken
    if HDR_LEN + payload_len > ip.len() {
        return Err(Ipv6Error::Bad);
    }
    let next_header = ip[6];
    let udp = if next_header == IPPROTO_UDP && payload_len >= 8 {
        let off = l3 + HDR_LEN;
        let udp_len = usize::from(rd16(frame, off + 4));
        Some(Udp {
            off,
            src_port: rd16(frame, off),
            dst_port: rd16(frame, off + 2),
            valid_len: udp_len >= 8 && udp_len <= payload_len,
        })
    } else {
        None
    };
    Ok(Parsed6 {
        l3,
        payload_len,
        src: rd128(ip, 8),
        dst: rd128(ip, 24),
        hop_limit: ip[7],
        next_header,
        traffic_class: ((rd16(ip, 0) >> 4) & 0xff) as u8,
        fragment: next_header == NEXT_HEADER_FRAGMENT,
        udp,
    })
}

/// RFC 1624 eqn. 3 over a 128-bit field: HC' = ~(~HC + ~m + m'), the eight
/// words summed before one fold (the sum of ~m is 8 * 0xffff - sum of m).
#[inline]
pub fn csum_update128(hc: u16, old: u128, new: u128) -> u16 {
    let not_old = 8 * 0xffff - old.word_sum();
    !fold(u32::from(!hc) + not_old + new.word_sum())
}

/// The UDP checksum after a relay rewrite (family.rs, either family's): a
/// zero result is sent as 0xffff, since IPv6 UDP always carries a checksum
/// (RFC 8200 8.1).
pub use super::family::udp_csum_rewrite;

#[cfg(test)]
pub mod testpkt {
    //! IPv6 frame builder for tests.
    use super::super::testpkt::udp_checksum_of;
    use super::super::wr16;
    use super::*;

    pub struct Udp6 {
        pub src: u128,
        pub dst: u128,
        pub sport: u16,
        pub dport: u16,
        pub hop_limit: u8,
        pub traffic_class: u8,
        pub payload: Vec<u8>,
        pub vlan: Option<u16>,
        pub next_header: u8,
    }

    /// 2001:db8:1::a (the UAC's side).
    pub const V6_UAC: u128 = 0x2001_0db8_0001_0000_0000_0000_0000_000a;
    /// 2001:db8:2::b (the UAS's side).
    pub const V6_UAS: u128 = 0x2001_0db8_0002_0000_0000_0000_0000_000b;
    /// 2001:db8:ff::1 (the relay).
    pub const V6_RELAY: u128 = 0x2001_0db8_00ff_0000_0000_0000_0000_0001;

    impl Default for Udp6 {
        fn default() -> Self {
            Udp6 {
                src: V6_UAC,
                dst: V6_RELAY,
                sport: 4000,
                dport: 20000,
                hop_limit: 64,
                traffic_class: 0xb8,
                payload: super::super::testpkt::rtp(0, 5, 1000, 160),
                vlan: None,
                next_header: IPPROTO_UDP,
            }
        }
    }

    /// The UDP checksum a receiver computes (0 computed is sent as 0xffff).
    pub fn udp6_checksum(frame: &[u8], p: &Parsed6) -> u16 {
        let u = p.udp.unwrap();
        udp_checksum_of(frame, p.l3 + 8..p.l3 + 40, u.off, p.payload_len)
    }

    impl Udp6 {
        pub fn build(&self) -> Vec<u8> {
            let mut f = vec![0x02, 0, 0, 0, 0, 0xfe, 0x02, 0, 0, 0, 0, 0x01];
            if let Some(v) = self.vlan {
                f.extend_from_slice(&[0x81, 0x00]);
                f.extend_from_slice(&v.to_be_bytes());
            }
            f.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
            let l3 = f.len();
            let plen = 8 + self.payload.len();
            let mut ip = vec![0u8; HDR_LEN];
            wr16(&mut ip, 0, 0x6000 | (u16::from(self.traffic_class) << 4));
            ip[2] = 0x12; // flow label
            ip[3] = 0x34;
            wr16(&mut ip, 4, plen as u16);
            ip[6] = self.next_header;
            ip[7] = self.hop_limit;
            wr128(&mut ip, 8, self.src);
            wr128(&mut ip, 24, self.dst);
            f.extend_from_slice(&ip);
            let mut udp = vec![0u8; 8];
            wr16(&mut udp, 0, self.sport);
            wr16(&mut udp, 2, self.dport);
            wr16(&mut udp, 4, plen as u16);
            f.extend_from_slice(&udp);
            f.extend_from_slice(&self.payload);
            if self.next_header == IPPROTO_UDP {
                let p = parse_at(&f, l3).unwrap();
                let c = udp6_checksum(&f, &p);
                wr16(&mut f, l3 + HDR_LEN + 6, c);
            }
            f
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse_l3, wr16, ParseError, L3};
    use super::testpkt::*;
    use super::*;
    use proptest::prelude::*;

    fn parsed(f: &[u8]) -> Parsed6 {
        match parse_l3(f).unwrap() {
            L3::V6(p) => p,
            L3::V4(_) => panic!("IPv6 expected"),
        }
    }

    #[test]
    fn parses_the_fixed_header_udp_and_vlan() {
        for vlan in [None, Some(7)] {
            let f = Udp6 {
                vlan,
                ..Udp6::default()
            }
            .build();
            let p = parsed(&f);
            assert_eq!(p.l3, if vlan.is_some() { 18 } else { 14 });
            assert_eq!((p.src, p.dst, p.hop_limit), (V6_UAC, V6_RELAY, 64));
            assert_eq!(p.traffic_class, 0xb8);
            assert_eq!(p.dscp(), 46);
            assert_eq!(p.payload_len, 8 + 172);
            assert_eq!(p.end(), f.len());
            let u = p.udp.unwrap();
            assert_eq!((u.src_port, u.dst_port, u.valid_len), (4000, 20000, true));
            assert!(!p.fragment);
        }
    }

    #[test]
    fn bad_headers_and_other_next_headers_are_classified() {
        let good = Udp6::default().build();
        assert_eq!(parse_l3(&good[..14 + 39]), Err(ParseError::BadIpv6));
        let mut v4 = good.clone();
        v4[14] = 0x40;
        assert_eq!(
            parse_l3(&v4),
            Err(ParseError::BadIpv6),
            "version 4 in 0x86DD"
        );
        let mut long = good.clone();
        wr16(&mut long, 14 + 4, 2000);
        assert_eq!(parse_l3(&long), Err(ParseError::BadIpv6));
        // Ethernet padding beyond the payload is fine
        let mut padded = good.clone();
        padded.extend_from_slice(&[0; 10]);
        assert_eq!(parsed(&padded).end(), good.len());
        // a fragment: no UDP
        let f = Udp6 {
            next_header: NEXT_HEADER_FRAGMENT,
            ..Udp6::default()
        }
        .build();
        let p = parsed(&f);
        assert!(p.fragment && p.udp.is_none());
        // ICMPv6: routed, no L4
        let f = Udp6 {
            next_header: IPPROTO_ICMPV6,
            ..Udp6::default()
        }
        .build();
        assert!(parsed(&f).udp.is_none());
        // a UDP length beyond the payload: parsed, not valid
        let mut f = good.clone();
        wr16(&mut f, 14 + 40 + 4, 1000);
        assert!(!parsed(&f).udp.unwrap().valid_len);
    }

    #[test]
    fn the_rewrite_checksum_matches_a_full_recompute() {
        let mut f = Udp6::default().build();
        let p = parsed(&f);
        let u = p.udp.unwrap();
        let c0 = rd16(&f, u.off + 6);
        let new = (V6_RELAY, V6_UAS, 20002u16, 6000u16);
        let c = udp_csum_rewrite(c0, (p.src, p.dst, u.src_port, u.dst_port), new);
        wr128(&mut f, p.l3 + 8, new.0);
        wr128(&mut f, p.l3 + 24, new.1);
        wr16(&mut f, u.off, new.2);
        wr16(&mut f, u.off + 2, new.3);
        wr16(&mut f, u.off + 6, c);
        assert_eq!(c, udp6_checksum(&f, &parsed(&f)));
        // word by word gives the same
        let mut w = csum_update128(c0, p.src, new.0);
        w = csum_update128(w, p.dst, new.1);
        w = super::super::csum_update16(w, u.src_port, new.2);
        w = super::super::csum_update16(w, u.dst_port, new.3);
        assert_eq!(if w == 0 { 0xffff } else { w }, c);
    }

    /// A rewrite whose checksum comes out as zero is sent as 0xffff.
    #[test]
    fn a_zero_result_is_sent_as_ffff() {
        // Find a destination port that makes the rewritten sum zero: the
        // checksum is ~sum, so pick dport so that the sum is 0xffff.
        let mut f = Udp6::default().build();
        let p = parsed(&f);
        let u = p.udp.unwrap();
        let c0 = rd16(&f, u.off + 6);
        let old = (p.src, p.dst, u.src_port, u.dst_port);
        let base = udp_csum_rewrite(c0, old, (V6_RELAY, V6_UAS, 20002, 0));
        // with dport 0 the checksum is `base`; adding d to the sum lowers
        // the checksum by d (mod one's complement): d = base makes it -0
        let dport = if base == 0xffff { 0 } else { base };
        let c = udp_csum_rewrite(c0, old, (V6_RELAY, V6_UAS, 20002, dport));
        assert_eq!(c, 0xffff);
        wr128(&mut f, p.l3 + 8, V6_RELAY);
        wr128(&mut f, p.l3 + 24, V6_UAS);
        wr16(&mut f, u.off, 20002);
        wr16(&mut f, u.off + 2, dport);
        wr16(&mut f, u.off + 6, c);
        assert_eq!(udp6_checksum(&f, &parsed(&f)), 0xffff);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2048, .. ProptestConfig::default() })]
        #[test]
        fn the_incremental_update_always_matches(src in any::<u128>(), dst in any::<u128>(),
                sport in any::<u16>(), dport in any::<u16>(), len in 0usize..64) {
            let mut f = Udp6 { payload: vec![0x5a; len], ..Udp6::default() }.build();
            let p = parsed(&f);
            let u = p.udp.unwrap();
            let c0 = rd16(&f, u.off + 6);
            let c = udp_csum_rewrite(c0, (p.src, p.dst, u.src_port, u.dst_port), (src, dst, sport, dport));
            wr128(&mut f, p.l3 + 8, src);
            wr128(&mut f, p.l3 + 24, dst);
            wr16(&mut f, u.off, sport);
            wr16(&mut f, u.off + 2, dport);
            wr16(&mut f, u.off + 6, c);
            prop_assert_eq!(c, udp6_checksum(&f, &parsed(&f)));
            prop_assert_ne!(c, 0);
        }

        #[test]
        fn mutated_frames_never_panic(idx in 0usize..240, val in any::<u8>(), cut in 0usize..240) {
            let mut f = Udp6::default().build();
            let i = idx % f.len();
            f[i] = val;
            f.truncate(cut.max(1));
            if let Ok(L3::V6(p)) = parse_l3(&f) {
                prop_assert!(p.end() <= f.len());
            }
        }
    }
}
