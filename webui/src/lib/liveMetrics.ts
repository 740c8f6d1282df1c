// What the live table shows per call: current quality from the latest samples
// when the stream delivered some, else the stored aggregates.
import type { LiveSession } from '../api/types';

/** The worse direction's latest MOS (a call is as good as its worse half);
 * null when one direction carries no media (one-way: no quality to rate). */
export function currentMos(s: LiveSession): number | null {
  if (s.one_way) return null;
  const dirs = Object.values(s.live?.dirs ?? {});
  const vals = dirs.map((d) => d.mos).filter((m): m is number => m != null);
  if (vals.length) return Math.min(...vals);
  return s.mos_avg;
}

export function currentJitterMs(s: LiveSession): number | null {
  const dirs = Object.values(s.live?.dirs ?? {});
  if (dirs.length) return Math.max(...dirs.map((d) => d.jitter_ms));
  return s.jitter_ms_max;
}

/** Loss over the call so far: the server's running counters (summed across
 * directions) plus the samples streamed since they were loaded. */
export function lossFraction(s: LiveSession): number | null {
  if (s.packets != null && s.lost != null && s.packets + s.lost > 0) return s.lost / (s.packets + s.lost);
  return null;
}

export function packetCount(s: LiveSession): number | null {
  return s.packets;
}
