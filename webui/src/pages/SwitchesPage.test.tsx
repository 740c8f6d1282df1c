import { render, screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import type { SwitchInfo } from '../api/types';
import { Occupancy } from './SwitchesPage';

const sw = (over: Partial<SwitchInfo> = {}): SwitchInfo => ({
  id: 1, name: 'sw1', grpc_address: '127.0.0.1:50052', device_id: 0, up: true,
  created_at: '2026-01-01T00:00:00Z', last_seen: '2026-01-01T00:00:05Z',
  relay_table_used: null, relay_table_capacity: null, ports: [], ...over,
});

describe('relay table occupancy', () => {
  it('shows entries in use against the table size with a gauge', () => {
    render(<Occupancy sw={sw({ relay_table_used: 58_982, relay_table_capacity: 65_536 })} offloadedCalls={14_745} />);
    expect(screen.getByTestId('relay-occupancy')).toHaveTextContent('58,982 of 65,536 relay entries in use (90.0 %)');
    const gauge = screen.getByRole('meter', { name: 'Relay table occupancy of sw1' });
    expect(gauge).toHaveAttribute('value', '58982');
    expect(gauge).toHaveAttribute('max', '65536');
    expect(screen.getByText(/offloaded calls/)).toHaveTextContent('14.7K offloaded calls');
  });

  it('says so when the collector has not reported it', () => {
    render(<Occupancy sw={sw()} offloadedCalls={0} />);
    expect(screen.getByTestId('relay-occupancy')).toHaveTextContent(/not reported yet/);
    expect(screen.queryByRole('meter')).toBeNull();
  });
});
