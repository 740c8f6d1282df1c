//! Parser and checksum helpers. The parser only computes offsets into the
//! frame (no copies, no allocation); every length is checked before use, so
//! any byte string yields a defined `Parsed` or a `ParseError`. IPv6:
//! `ipv6.rs`; `parse_l3` takes either family.

pub mod family;
pub mod ipv6;

/// Why a frame is not IPv4 the pipeline can route. Each is counted per port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than an Ethernet (+VLAN) header.
    Truncated,
    /// ARP, IPv6, LLDP, ... : dropped (the pipeline forwards IPv4 only).
    NotIpv4,
    /// IPv4 header cut short, version != 4, IHL < 5, or total length inconsistent.
    BadIpv4,
    /// IPv4 header checksum wrong (RFC 1812 5.2.2: discard).
    BadIpChecksum,
    /// IPv6 header cut short, version != 6, or payload length beyond the frame.
    BadIpv6,
}

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_VLAN: u16 = 0x8100;
pub const IPPROTO_UDP: u8 = 17;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp {
    /// Offset of the UDP header in the frame.
    pub off: usize,
    pub src_port: u16,
    pub dst_port: u16,
    /// Length the UDP header claims and the IPv4 payload holds.
    pub valid_len: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// Offset of the IPv4 header.
    pub l3: usize,
    /// IPv4 header length in bytes (20..=60; options are skipped, kept as they are).
    pub ihl: usize,
    /// IPv4 total length (the frame may carry Ethernet padding beyond it).
    pub total_len: usize,
    pub src: u32,
    pub dst: u32,
    pub ttl: u8,
    pub proto: u8,
    /// MF set or fragment offset != 0: no L4 processing (only the first
    /// fragment has the UDP header, and the rest could not be rewritten).
    pub fragment: bool,
    /// UDP header of an unfragmented datagram.
    pub udp: Option<Udp>,
}

#[inline]
pub fn rd16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[inline]
pub fn rd32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[inline]
pub fn rd128(b: &[u8], off: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[off..off + 16]);
    u128::from_be_bytes(a)
}

#[inline]
pub fn wr128(b: &mut [u8], off: usize, v: u128) {
    b[off..off + 16].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub fn wr16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub fn wr32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}

/// One's-complement sum of 16-bit words (odd trailing byte padded), unfolded.
pub fn ones_sum(data: &[u8]) -> u32 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

#[inline]
pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// IPv4 header checksum over `hdr` with its checksum field treated as zero.
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let sum = ones_sum(hdr) - u32::from(rd16(hdr, 10));
    !fold(sum)
}

/// RFC 1624 incremental update: HC' = ~(~HC + ~m + m') for one 16-bit word.
#[inline]
pub fn csum_update16(hc: u16, old: u16, new: u16) -> u16 {
    !fold(u32::from(!hc) + u32::from(!old) + u32::from(new))
}

#[inline]
pub fn csum_update32(hc: u16, old: u32, new: u32) -> u16 {
    let hc = csum_update16(hc, (old >> 16) as u16, (new >> 16) as u16);
    csum_update16(hc, old as u16, new as u16)
}

/// An IP packet of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L3 {
    V4(Parsed),
    V6(ipv6::Parsed6),
}

/// The ethertype after an optional 802.1Q tag, and the L3 offset.
#[inline]
fn ethertype(frame: &[u8]) -> Result<(u16, usize), ParseError> {
    if frame.len() < 14 {
        return Err(ParseError::Truncated);
    }
    let ethertype = rd16(frame, 12);
    if ethertype == ETHERTYPE_VLAN {
        if frame.len() < 18 {
            return Err(ParseError::Truncated);
        }
        return Ok((rd16(frame, 16), 18));
    }
    Ok((ethertype, 14))
}

/// Parses Ethernet / optional 802.1Q / IPv4 or IPv6 / UDP.
pub fn parse_l3(frame: &[u8]) -> Result<L3, ParseError> {
    match ethertype(frame)? {
        (ETHERTYPE_IPV4, l3) => parse_ipv4(frame, l3).map(L3::V4),
        (ipv6::ETHERTYPE_IPV6, l3) => ipv6::parse_at(frame, l3)
            .map(L3::V6)
            .map_err(|ipv6::Ipv6Error::Bad| ParseError::BadIpv6),
        _ => Err(ParseError::NotIpv4),
    }
}

/// Parses Ethernet / optional 802.1Q / IPv4 / UDP (anything else: `NotIpv4`).
pub fn parse(frame: &[u8]) -> Result<Parsed, ParseError> {
    match ethertype(frame)? {
        (ETHERTYPE_IPV4, l3) => parse_ipv4(frame, l3),
        _ => Err(ParseError::NotIpv4),
    }
}

fn parse_ipv4(frame: &[u8], l3: usize) -> Result<Parsed, ParseError> {
    let ip = &frame[l3..];
    if ip.len() < 20 || ip[0] >> 4 != 4 {
        return Err(ParseError::BadIpv4);
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total_len = usize::from(rd16(ip, 2));
    if ihl < 20 || ip.len() < ihl || total_len < ihl || total_len > ip.len() {
        return Err(ParseError::BadIpv4);
    }
    if fold(ones_sum(&ip[..ihl])) != 0xffff {
        return Err(ParseError::BadIpChecksum);
    }
    let flags_frag = rd16(ip, 6);
    let fragment = flags_frag & 0x3fff != 0;
    let proto = ip[9];
    let udp = if proto == IPPROTO_UDP && !fragment && total_len >= ihl + 8 {
        let off = l3 + ihl;
        let udp_len = usize::from(rd16(frame, off + 4));
        Some(Udp {
            off,
            src_port: rd16(frame, off),
            dst_port: rd16(frame, off + 2),
            valid_len: udp_len >= 8 && udp_len <= total_len - ihl,
        })
    } else {
        None
    };
    Ok(Parsed {
        l3,
        ihl,
        total_len,
        src: rd32(ip, 12),
        dst: rd32(ip, 16),
        ttl: ip[8],
        proto,
        fragment,
        udp,
    })
}

/// RTP v2 fixed header fields the quality registers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rtp {
    pub payload_type: u8,
    pub seq: u16,
    pub timestamp: u32,
}

/// RTP fixed header in a UDP payload: version 2 and at least 12 bytes.
pub fn parse_rtp(frame: &[u8], udp: &Udp, p: &Parsed) -> Option<Rtp> {
    parse_rtp_in(frame, udp, p.l3 + p.total_len)
}

/// RTP in a UDP datagram whose IP packet ends at `end` (either family).
pub fn parse_rtp_in(frame: &[u8], udp: &Udp, end: usize) -> Option<Rtp> {
    let payload = udp.off + 8;
    if !udp.valid_len || end < payload + 12 || frame.len() < end {
        return None;
    }
    let h = &frame[payload..payload + 12];
    if h[0] >> 6 != 2 {
        return None;
    }
    Some(Rtp {
        payload_type: h[1] & 0x7f,
        seq: rd16(h, 2),
        timestamp: rd32(h, 4),
    })
}

#[cfg(test)]
pub mod testpkt {
    //! Frame builder for tests.
    use super::*;

    pub struct Udp4 {
        pub src: u32,
        pub dst: u32,
        pub sport: u16,
        pub dport: u16,
        pub ttl: u8,
        pub payload: Vec<u8>,
        pub vlan: Option<u16>,
        pub options: Vec<u8>,
        pub udp_csum: bool,
    }

    impl Default for Udp4 {
        fn default() -> Self {
            Udp4 {
                src: 0xc612_010a,
                dst: 0xc612_000a,
                sport: 4000,
                dport: 20000,
                ttl: 64,
                payload: rtp(0, 5, 1000, 160),
                vlan: None,
                options: vec![],
                udp_csum: true,
            }
        }
    }

    pub fn rtp(pt: u8, seq: u16, ts: u32, len: usize) -> Vec<u8> {
        let mut v = vec![0x80, pt, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78];
        wr16(&mut v, 2, seq);
        wr32(&mut v, 4, ts);
        v.resize(12 + len, 0xd5);
        v
    }

    pub fn udp_checksum(frame: &[u8], p: &Parsed) -> u16 {
        let u = p.udp.unwrap();
        udp_checksum_of(frame, p.l3 + 12..p.l3 + 20, u.off, p.total_len - p.ihl)
    }

    /// The UDP checksum a receiver computes, either family's: the
    /// pseudo-header's addresses at `addrs`, the datagram of `len` bytes at
    /// `off` (0 computed is sent as 0xffff).
    pub fn udp_checksum_of(
        frame: &[u8],
        addrs: std::ops::Range<usize>,
        off: usize,
        len: usize,
    ) -> u16 {
        let mut sum = ones_sum(&frame[addrs]) + u32::from(IPPROTO_UDP) + len as u32;
        let mut seg = frame[off..off + len].to_vec();
        seg[6] = 0;
        seg[7] = 0;
        sum += ones_sum(&seg);
        match !fold(sum) {
            0 => 0xffff,
            c => c,
        }
    }

    impl Udp4 {
        pub fn build(&self) -> Vec<u8> {
            let mut f = vec![0x02, 0, 0, 0, 0, 0xfe, 0x02, 0, 0, 0, 0, 0x01];
            if let Some(v) = self.vlan {
                f.extend_from_slice(&[0x81, 0x00]);
                f.extend_from_slice(&v.to_be_bytes());
            }
            f.extend_from_slice(&[0x08, 0x00]);
            let l3 = f.len();
            let ihl = 20 + self.options.len();
            let total = ihl + 8 + self.payload.len();
            let mut ip = vec![
                0x40 | (ihl / 4) as u8,
                0xb8,
                0,
                0,
                0x12,
                0x34,
                0,
                0,
                self.ttl,
                IPPROTO_UDP,
                0,
                0,
            ];
            wr16(&mut ip, 2, total as u16);
            ip.extend_from_slice(&self.src.to_be_bytes());
            ip.extend_from_slice(&self.dst.to_be_bytes());
            ip.extend_from_slice(&self.options);
            let c = ipv4_checksum(&ip);
            wr16(&mut ip, 10, c);
            f.extend_from_slice(&ip);
            let mut udp = vec![0u8; 8];
            wr16(&mut udp, 0, self.sport);
            wr16(&mut udp, 2, self.dport);
            wr16(&mut udp, 4, (8 + self.payload.len()) as u16);
            f.extend_from_slice(&udp);
            f.extend_from_slice(&self.payload);
            if self.udp_csum {
                let p = parse(&f).unwrap();
                let c = udp_checksum(&f, &p);
                wr16(&mut f, l3 + ihl + 6, c);
            }
            f
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testpkt::*;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_udp_rtp_and_vlan() {
        for vlan in [None, Some(7)] {
            let f = Udp4 {
                vlan,
                ..Udp4::default()
            }
            .build();
            let p = parse(&f).unwrap();
            assert_eq!(p.l3, if vlan.is_some() { 18 } else { 14 });
            let u = p.udp.unwrap();
            assert_eq!((u.src_port, u.dst_port, u.valid_len), (4000, 20000, true));
            assert_eq!(
                parse_rtp(&f, &u, &p),
                Some(Rtp {
                    payload_type: 0,
                    seq: 5,
                    timestamp: 1000
                })
            );
        }
    }

    #[test]
    fn ipv4_options_are_skipped() {
        let f = Udp4 {
            options: vec![1, 1, 1, 0],
            ..Udp4::default()
        }
        .build();
        let p = parse(&f).unwrap();
        assert_eq!(p.ihl, 24);
        assert_eq!(p.udp.unwrap().dst_port, 20000);
    }

    #[test]
    fn bad_inputs_are_classified() {
        let good = Udp4::default().build();
        assert_eq!(parse(&good[..10]), Err(ParseError::Truncated));
        assert_eq!(parse(&good[..30]), Err(ParseError::BadIpv4));
        let mut arp = good.clone();
        wr16(&mut arp, 12, 0x0806);
        assert_eq!(parse(&arp), Err(ParseError::NotIpv4));
        let mut bad = good.clone();
        bad[14 + 8] = 3; // TTL changed without checksum
        assert_eq!(parse(&bad), Err(ParseError::BadIpChecksum));
        let mut frag = good.clone();
        wr16(&mut frag, 14 + 6, 0x2000); // MF
        let c = ipv4_checksum(&frag[14..34]);
        wr16(&mut frag, 24, c);
        let p = parse(&frag).unwrap();
        assert!(p.fragment && p.udp.is_none());
        // not RTP: version 0
        let f = Udp4 {
            payload: vec![0; 40],
            ..Udp4::default()
        }
        .build();
        let p = parse(&f).unwrap();
        assert_eq!(parse_rtp(&f, &p.udp.unwrap(), &p), None);
    }

    #[test]
    fn incremental_checksum_matches_recompute() {
        let mut f = Udp4::default().build();
        let p = parse(&f).unwrap();
        let u = p.udp.unwrap();
        let mut c = rd16(&f, u.off + 6);
        c = csum_update32(c, p.src, 0x0a0b0c0d);
        c = csum_update16(c, u.src_port, 30000);
        wr32(&mut f, p.l3 + 12, 0x0a0b0c0d);
        wr16(&mut f, u.off, 30000);
        wr16(&mut f, u.off + 6, c);
        let ipc = ipv4_checksum(&f[14..34]);
        wr16(&mut f, 24, ipc);
        let p2 = parse(&f).unwrap();
        assert_eq!(udp_checksum(&f, &p2), c);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, .. ProptestConfig::default() })]
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(p) = parse(&bytes) {
                prop_assert!(p.l3 + p.total_len <= bytes.len());
                if let Some(u) = p.udp { let _ = parse_rtp(&bytes, &u, &p); }
            }
        }

        #[test]
        fn mutated_valid_frames_never_panic(idx in 0usize..230, val in any::<u8>(), cut in 0usize..230) {
            let mut f = Udp4::default().build();
            let i = idx % f.len();
            f[i] = val;
            f.truncate(cut.max(1));
            if let Ok(p) = parse(&f) {
                if let Some(u) = p.udp { let _ = parse_rtp(&f, &u, &p); }
            }
        }
    }
}
