import type { CSSProperties, ReactNode } from 'react';

/** A table box that may scroll: focusable and named so keyboard users can scroll it too (WCAG 2.1.1). */
export function ScrollRegion({ label, children, style }: { label: string; children: ReactNode; style?: CSSProperties }) {
  return (
    // eslint-disable-next-line jsx-a11y/no-noninteractive-tabindex -- a scrollable region must take focus to scroll by keyboard
    <div className="table-wrap" role="region" aria-label={label} tabIndex={0} style={style}>
      {children}
    </div>
  );
}
