//! Egress-drop active queue management of a port's queue (`--port-aqm`):
//! CoDel (RFC 8289) and PI2 (RFC 9332's Classic AQM), the egress AQMs the
//! iRED paper compares iRED with (P4-CoDel, PI2 for P4). They decide as a
//! packet leaves the queue from its sojourn time and drop it there; the
//! queue is the traffic manager's, not the P4 program's, so they are start-up
//! options of the switch like its line rates and take no BfRt objects.

use std::fmt;

use anyhow::{bail, Context, Result};

/// Below this backlog CoDel never drops (RFC 8289 `maxpacket`: one MTU frame).
const MAX_PACKET_BYTES: u64 = 1514;
/// PI2's update period and gains (RFC 9332 Appendix A: Tupdate 16 ms,
/// alpha 0.16 Hz, beta 3.2 Hz).
const PI2_TUPDATE_NS: u64 = 16_000_000;
const PI2_ALPHA_HZ: f64 = 0.16;
const PI2_BETA_HZ: f64 = 3.2;
/// Updates caught up at once after the queue sat idle.
const PI2_MAX_CATCHUP: u64 = 64;

/// A port's AQM as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AqmConfig {
    /// CoDel with its target and interval (defaults 5 ms / 100 ms, the iRED
    /// paper's Table II and RFC 8289's).
    Codel { target_us: u32, interval_us: u32 },
    /// PI2 with its target delay (default 20 ms, the iRED paper's Table III);
    /// a Classic packet is dropped with chance p'^2.
    Pi2 { target_us: u32 },
}

impl fmt::Display for AqmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AqmConfig::Codel {
                target_us,
                interval_us,
            } => write!(f, "codel:{target_us}:{interval_us}"),
            AqmConfig::Pi2 { target_us } => write!(f, "pi2:{target_us}"),
        }
    }
}

impl AqmConfig {
    /// `codel[:TARGET_US[:INTERVAL_US]]` or `pi2[:TARGET_US]`.
    pub fn parse(text: &str) -> Result<AqmConfig> {
        let mut parts = text.split(':');
        let kind = parts.next().unwrap_or_default();
        let nums = parts
            .map(|p| {
                p.parse::<u32>()
                    .ok()
                    .filter(|v| (100..=10_000_000).contains(v))
                    .with_context(|| format!("{p:?}: microseconds, 100..=10000000"))
            })
            .collect::<Result<Vec<u32>>>()?;
        Ok(match (kind, nums.as_slice()) {
            ("codel", []) => AqmConfig::Codel {
                target_us: 5_000,
                interval_us: 100_000,
            },
            ("codel", [t]) => AqmConfig::Codel {
                target_us: *t,
                interval_us: 100_000.max(*t),
            },
            ("codel", [t, i]) if t <= i => AqmConfig::Codel {
                target_us: *t,
                interval_us: *i,
            },
            ("codel", [_, _]) => bail!("codel: the target must not exceed the interval"),
            ("pi2", []) => AqmConfig::Pi2 { target_us: 20_000 },
            ("pi2", [t]) => AqmConfig::Pi2 { target_us: *t },
            _ => bail!("expected codel[:TARGET_US[:INTERVAL_US]] or pi2[:TARGET_US]"),
        })
    }
}

/// The AQM's state in one port's queue (under the queue's lock).
#[derive(Debug)]
pub struct Aqm {
    cfg: AqmConfig,
    // CoDel
    first_above_ns: u64,
    drop_next_ns: u64,
    count: u32,
    last_count: u32,
    dropping: bool,
    // PI2
    p: f64,
    prev_qdelay_s: f64,
    next_update_ns: u64,
    rng: u64,
}

impl Aqm {
    pub fn new(cfg: AqmConfig) -> Aqm {
        Aqm {
            cfg,
            first_above_ns: 0,
            drop_next_ns: 0,
            count: 0,
            last_count: 0,
            dropping: false,
            p: 0.0,
            prev_qdelay_s: 0.0,
            next_update_ns: 0,
            rng: 0x2545_f491_4f6c_dd1d,
        }
    }

    /// Whether the packet at the head, queued `sojourn_ns`, with `backlog`
    /// bytes in the queue (itself included), is dropped as it leaves.
    pub fn drop_at_dequeue(&mut self, now_ns: u64, sojourn_ns: u64, backlog: u64) -> bool {
        match self.cfg {
            AqmConfig::Codel {
                target_us,
                interval_us,
            } => self.codel(
                now_ns,
                sojourn_ns,
                backlog,
                u64::from(target_us) * 1000,
                u64::from(interval_us) * 1000,
            ),
            AqmConfig::Pi2 { target_us } => {
                self.pi2_update(now_ns, sojourn_ns, f64::from(target_us) * 1e-6);
                self.p * self.p > self.uniform()
            }
        }
    }

    /// RFC 8289's dequeue, one packet per call: the drop state is kept
    /// between calls, and the next head is judged on its own sojourn time.
    fn codel(&mut self, now: u64, sojourn: u64, backlog: u64, target: u64, interval: u64) -> bool {
        let ok_to_drop = if sojourn < target || backlog <= MAX_PACKET_BYTES {
            self.first_above_ns = 0;
            false
        } else if self.first_above_ns == 0 {
            self.first_above_ns = now + interval;
            false
        } else {
            now >= self.first_above_ns
        };
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
                return false;
            }
            if now >= self.drop_next_ns {
                self.count += 1;
                self.drop_next_ns = control_law(self.drop_next_ns, interval, self.count);
                return true;
            }
            return false;
        }
        if !ok_to_drop {
            return false;
        }
        self.dropping = true;
        let delta = self.count.saturating_sub(self.last_count);
        // Re-entering the drop state soon after leaving it resumes the rate.
        self.count = if delta > 1 && now.saturating_sub(self.drop_next_ns) < 16 * interval {
            delta
        } else {
            1
        };
        self.drop_next_ns = control_law(now, interval, self.count);
        self.last_count = self.count;
        true
    }

    /// The PI controller every Tupdate (RFC 9332 A.1 `dualpi2_update`), run
    /// as packets leave: the periods the queue sat idle are caught up with
    /// the current (short) delay.
    fn pi2_update(&mut self, now: u64, sojourn: u64, target_s: f64) {
        if self.next_update_ns == 0 {
            self.next_update_ns = now + PI2_TUPDATE_NS;
            return;
        }
        let qdelay = sojourn as f64 * 1e-9;
        let t = PI2_TUPDATE_NS as f64 * 1e-9;
        let mut n = 0;
        while now >= self.next_update_ns && n < PI2_MAX_CATCHUP {
            self.p += PI2_ALPHA_HZ * t * (qdelay - target_s)
                + PI2_BETA_HZ * t * (qdelay - self.prev_qdelay_s);
            self.p = self.p.clamp(0.0, 1.0);
            self.prev_qdelay_s = qdelay;
            self.next_update_ns += PI2_TUPDATE_NS;
            n += 1;
        }
        if now >= self.next_update_ns {
            self.next_update_ns = now + PI2_TUPDATE_NS;
        }
    }

    /// Uniform in [0, 1) (xorshift64: a coin, not a secret).
    fn uniform(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// PI2's base probability p' (tests, logs).
    pub fn pi2_prob(&self) -> f64 {
        self.p
    }
}

/// Next drop: `t + interval / sqrt(count)`.
fn control_law(t: u64, interval: u64, count: u32) -> u64 {
    t + (interval as f64 / f64::from(count.max(1)).sqrt()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn parses_and_refuses() {
        assert_eq!(
            AqmConfig::parse("codel").unwrap(),
            AqmConfig::Codel {
                target_us: 5_000,
                interval_us: 100_000
            }
        );
        assert_eq!(
            AqmConfig::parse("pi2:15000").unwrap(),
            AqmConfig::Pi2 { target_us: 15_000 }
        );
        assert_eq!(
            AqmConfig::parse("codel:2000:50000").unwrap().to_string(),
            "codel:2000:50000"
        );
        for bad in ["", "red", "codel:x", "codel:50000:2000", "pi2:1:2", "pi2:0"] {
            assert!(AqmConfig::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn codel_drops_after_an_interval_above_target_then_faster() {
        let mut a = Aqm::new(AqmConfig::parse("codel").unwrap());
        let big = 100_000;
        // below target: never
        assert!(!(0..100).any(|i| a.drop_at_dequeue(i * MS, 4 * MS, big)));
        // above target from t = 1 s: the first drop one interval later
        let t0 = 1_000 * MS;
        let drops: Vec<u64> = (0..400)
            .map(|i| t0 + i * MS)
            .filter(|&t| a.drop_at_dequeue(t, 10 * MS, big))
            .collect();
        assert_eq!(drops[0], t0 + 100 * MS);
        // then at interval / sqrt(count): 100 ms, 100/sqrt(2) ≈ 70.7 ms, 100/sqrt(3) ≈ 57.7 ms
        assert_eq!(drops[1] - drops[0], 100 * MS);
        assert_eq!(drops[2] - drops[1], 71 * MS);
        assert_eq!(drops[3] - drops[2], 58 * MS);
        // a backlog of one packet is never dropped, and ends the drop state
        assert!(!a.drop_at_dequeue(t0 + 500 * MS, 50 * MS, 1514));
        assert!(!a.dropping);
    }

    #[test]
    fn pi2_probability_rises_above_target_and_falls_below() {
        let mut a = Aqm::new(AqmConfig::parse("pi2").unwrap());
        // 20 s at 100 ms: the integral term climbs 0.16 Hz x 16 ms x 80 ms per update
        let mut drops = 0;
        for i in 0..20_000u64 {
            drops += u32::from(a.drop_at_dequeue(i * MS, 100 * MS, 100_000));
        }
        let high = a.pi2_prob();
        assert!((0.2..0.3).contains(&high), "{high}");
        assert!(drops > 200, "{drops}"); // p^2 reaches ~0.06 at the end
        for i in 20_000..40_000u64 {
            a.drop_at_dequeue(i * MS, MS, 100_000);
        }
        assert!(a.pi2_prob() < high - 0.05, "{}", a.pi2_prob());
        // at the target the controller holds still (after the first step of
        // its proportional term, from no delay to the target)
        let mut b = Aqm::new(AqmConfig::parse("pi2").unwrap());
        b.drop_at_dequeue(0, 20 * MS, 100_000);
        b.drop_at_dequeue(16 * MS, 20 * MS, 100_000);
        let first = b.pi2_prob();
        for i in 17..1_000u64 {
            b.drop_at_dequeue(i * MS, 20 * MS, 100_000);
        }
        assert!(first > 0.0 && (b.pi2_prob() - first).abs() < 1e-12);
    }
}
