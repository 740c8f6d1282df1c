import { render, screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { MosBadge } from './MosBadge';

describe('MosBadge', () => {
  it('colours by band and names the band for screen readers', () => {
    render(<><MosBadge mos={4.35} /><MosBadge mos={3.4} /><MosBadge mos={null} /></>);
    expect(screen.getByText('4.35').closest('.badge')).toHaveClass('good');
    expect(screen.getByText('(poor)', { exact: false }).closest('.badge')).toHaveClass('poor');
    expect(screen.getByText('–').closest('.badge')).toHaveClass('unknown');
  });
});
