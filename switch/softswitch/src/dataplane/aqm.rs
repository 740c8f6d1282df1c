//! Egress-drop active queue management of a port's queue (`--port-aqm`):
//! CoDel (RFC 8289) and PI2 (RFC 9332's Classic AQM), the egress AQMs the
//! iRED paper compares iRED with (P4-CoDel, PI2 for P4). They decide as a
//! packet leaves the queue from its sojourn time and drop it there; the
//! queue is the traffic manager's, not the P4 program's, so they are start-up
//! options of the switch like its line rates and take no BfRt objects.

use crate::config::AqmConfig;

/// Below this backlog CoDel never drops (RFC 8289 `maxpacket`: one MTU frame).
const MAX_PACKET_BYTES: u64 = 1514;
/// Updates caught up at once after the queue sat idle.
const PI2_MAX_CATCHUP: u64 = 64;

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
            AqmConfig::Pi2 {
                target_us,
                tupdate_us,
                alpha_hz,
                beta_hz,
            } => {
                let gains = Pi2Gains {
                    target_s: f64::from(target_us) * 1e-6,
                    tupdate_ns: u64::from(tupdate_us) * 1000,
                    alpha_hz,
                    beta_hz,
                };
                self.pi2_update(now_ns, sojourn_ns, &gains);
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
    fn pi2_update(&mut self, now: u64, sojourn: u64, g: &Pi2Gains) {
        if self.next_update_ns == 0 {
            self.next_update_ns = now + g.tupdate_ns;
            return;
        }
        let qdelay = sojourn as f64 * 1e-9;
        let t = g.tupdate_ns as f64 * 1e-9;
        let mut n = 0;
        while now >= self.next_update_ns && n < PI2_MAX_CATCHUP {
            self.p += g.alpha_hz * t * (qdelay - g.target_s)
                + g.beta_hz * t * (qdelay - self.prev_qdelay_s);
            self.p = self.p.clamp(0.0, 1.0);
            self.prev_qdelay_s = qdelay;
            self.next_update_ns += g.tupdate_ns;
            n += 1;
        }
        if now >= self.next_update_ns {
            self.next_update_ns = now + g.tupdate_ns;
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

/// PI2's controller in the units it computes in.
struct Pi2Gains {
    target_s: f64,
    tupdate_ns: u64,
    alpha_hz: f64,
    beta_hz: f64,
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

    #[test]
    fn pi2_runs_its_configured_period_and_gains() {
        // the paper's PI2: updates every 33 ms, not 16
        let mut a = Aqm::new(AqmConfig::parse("pi2:20000:33000:0.3125:3.125").unwrap());
        a.drop_at_dequeue(0, 100 * MS, 100_000);
        a.drop_at_dequeue(32 * MS, 100 * MS, 100_000);
        assert_eq!(a.pi2_prob(), 0.0);
        a.drop_at_dequeue(33 * MS, 100 * MS, 100_000);
        // one step: alpha T (q - target) + beta T (q - 0)
        let step = 0.3125 * 0.033 * 0.08 + 3.125 * 0.033 * 0.1;
        assert!((a.pi2_prob() - step).abs() < 1e-12, "{}", a.pi2_prob());
        // the integral term per second of error is alpha (q - target), whatever
        // the period: 20 s at 100 ms climb to ~0.5 with alpha 0.3125 where
        // RFC 9332's 0.16 reaches ~0.26
        let climb = |spec: &str| {
            let mut a = Aqm::new(AqmConfig::parse(spec).unwrap());
            for i in 0..20_000u64 {
                a.drop_at_dequeue(i * MS, 100 * MS, 100_000);
            }
            a.pi2_prob()
        };
        let paper = climb("pi2:20000:33000:0.3125:3.125");
        let rfc = climb("pi2");
        assert!((0.45..0.56).contains(&paper), "{paper}");
        assert!((0.22..0.3).contains(&rfc), "{rfc}");
    }
}
