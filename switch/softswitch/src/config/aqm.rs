//! A port's egress AQM as configured (`--port-aqm`): CoDel or PI2 with
//! their parameters; dataplane::aqm runs it on the port's queue.

use std::fmt;

use anyhow::{bail, Context, Result};

/// PI2's default update period and gains (RFC 9332 Appendix A: Tupdate
/// 16 ms, alpha 0.16 Hz, beta 3.2 Hz).
const PI2_TUPDATE_US: u32 = 16_000;
const PI2_ALPHA_HZ: f64 = 0.16;
const PI2_BETA_HZ: f64 = 3.2;
/// Gains above this would move p by more than its whole range per second of
/// delay error; a typo, not a controller.
const PI2_MAX_GAIN_HZ: f64 = 100.0;

/// A port's AQM as configured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AqmConfig {
    /// CoDel with its target and interval (defaults 5 ms / 100 ms, the iRED
    /// paper's Table II and RFC 8289's).
    Codel { target_us: u32, interval_us: u32 },
    /// PI2 with its target delay (default 20 ms, the iRED paper's Table III)
    /// and its PI controller: update period and gains (defaults RFC 9332's);
    /// a Classic packet is dropped with chance p'^2.
    Pi2 {
        target_us: u32,
        tupdate_us: u32,
        alpha_hz: f64,
        beta_hz: f64,
    },
}

impl fmt::Display for AqmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AqmConfig::Codel {
                target_us,
                interval_us,
            } => write!(f, "codel:{target_us}:{interval_us}"),
            AqmConfig::Pi2 {
                target_us,
                tupdate_us,
                alpha_hz,
                beta_hz,
            } => write!(f, "pi2:{target_us}:{tupdate_us}:{alpha_hz}:{beta_hz}"),
        }
    }
}

const SYNTAX: &str =
    "expected codel[:TARGET_US[:INTERVAL_US]] or pi2[:TARGET_US[:TUPDATE_US[:ALPHA_HZ[:BETA_HZ]]]]";

fn micros(p: &str) -> Result<u32> {
    p.parse::<u32>()
        .ok()
        .filter(|v| (100..=10_000_000).contains(v))
        .with_context(|| format!("{p:?}: microseconds, 100..=10000000"))
}

fn hertz(p: &str) -> Result<f64> {
    p.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0 && *v <= PI2_MAX_GAIN_HZ)
        .with_context(|| format!("{p:?}: a gain in Hz, above 0 and at most {PI2_MAX_GAIN_HZ}"))
}

impl AqmConfig {
    /// `codel[:TARGET_US[:INTERVAL_US]]` or
    /// `pi2[:TARGET_US[:TUPDATE_US[:ALPHA_HZ[:BETA_HZ]]]]`.
    pub fn parse(text: &str) -> Result<AqmConfig> {
        let mut parts = text.split(':');
        let kind = parts.next().unwrap_or_default();
        let rest: Vec<&str> = parts.collect();
        Ok(match kind {
            "codel" => {
                let nums = rest
                    .iter()
                    .map(|p| micros(p))
                    .collect::<Result<Vec<u32>>>()?;
                match nums.as_slice() {
                    [] => AqmConfig::Codel {
                        target_us: 5_000,
                        interval_us: 100_000,
                    },
                    [t] => AqmConfig::Codel {
                        target_us: *t,
                        interval_us: 100_000.max(*t),
                    },
                    [t, i] if t <= i => AqmConfig::Codel {
                        target_us: *t,
                        interval_us: *i,
                    },
                    [_, _] => bail!("codel: the target must not exceed the interval"),
                    _ => bail!("{SYNTAX}"),
                }
            }
            "pi2" if rest.len() <= 4 => AqmConfig::Pi2 {
                target_us: rest.first().map_or(Ok(20_000), |p| micros(p))?,
                tupdate_us: rest.get(1).map_or(Ok(PI2_TUPDATE_US), |p| micros(p))?,
                alpha_hz: rest.get(2).map_or(Ok(PI2_ALPHA_HZ), |p| hertz(p))?,
                beta_hz: rest.get(3).map_or(Ok(PI2_BETA_HZ), |p| hertz(p))?,
            },
            _ => bail!("{SYNTAX}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            AqmConfig::Pi2 {
                target_us: 15_000,
                tupdate_us: 16_000,
                alpha_hz: 0.16,
                beta_hz: 3.2
            }
        );
        // the iRED paper's Table III (PI2 for P4)
        assert_eq!(
            AqmConfig::parse("pi2:20000:33000:0.3125:3.125").unwrap(),
            AqmConfig::Pi2 {
                target_us: 20_000,
                tupdate_us: 33_000,
                alpha_hz: 0.3125,
                beta_hz: 3.125
            }
        );
        assert_eq!(
            AqmConfig::parse("pi2:20000:33000:0.5").unwrap().to_string(),
            "pi2:20000:33000:0.5:3.2"
        );
        assert_eq!(
            AqmConfig::parse("codel:2000:50000").unwrap().to_string(),
            "codel:2000:50000"
        );
        for text in ["pi2", "pi2:20000:33000:0.3125:3.125", "codel"] {
            let c = AqmConfig::parse(text).unwrap();
            assert_eq!(AqmConfig::parse(&c.to_string()).unwrap(), c);
        }
        for bad in [
            "",
            "red",
            "codel:x",
            "codel:50000:2000",
            "codel:1000:2000:3000",
            "pi2:1:2",
            "pi2:0",
            "pi2:20000:99",
            "pi2::16000",
            "pi2:20000:16000:0",
            "pi2:20000:16000:-0.1",
            "pi2:20000:16000:nan",
            "pi2:20000:16000:inf",
            "pi2:20000:16000:0.16:101",
            "pi2:20000:16000:0.16:3.2:1",
        ] {
            assert!(AqmConfig::parse(bad).is_err(), "{bad}");
        }
        let e = format!("{:#}", AqmConfig::parse("pi2:20000:16000:x").unwrap_err());
        assert!(e.contains("\"x\": a gain in Hz"), "{e}");
    }
}
