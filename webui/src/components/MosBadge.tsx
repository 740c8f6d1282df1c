import { formatMos, mosBand } from '../lib/format';

const LABEL = { good: 'good', fair: 'fair', poor: 'poor', bad: 'bad', unknown: 'no data' } as const;

/** MOS as a colour-coded badge; the band is also spelled out for screen readers. */
export function MosBadge({ mos }: { mos: number | null | undefined }) {
  const band = mosBand(mos);
  return (
    <span className={`badge ${band}`} title={`MOS ${formatMos(mos)} (${LABEL[band]})`}>
      {formatMos(mos)}
      <span className="sr-only"> ({LABEL[band]})</span>
    </span>
  );
}
