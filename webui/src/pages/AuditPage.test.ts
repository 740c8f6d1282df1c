import { describe, expect, it } from 'vitest';
import { toFilters } from './AuditPage';

describe('audit filters', () => {
  it('maps the form to the server query, dropping empty fields', () => {
    expect(toFilters({
      since: '', until: '', state: '', offloaded: '', mos_min: '', mos_max: '', loss_min: '', jitter_min: '', call_id: '  ', address: '', switch: '',
    })).toEqual({
      started_from: undefined, started_to: undefined, state: undefined, offloaded: undefined, mos_min: undefined,
      mos_max: undefined, loss_min: undefined, jitter_min: undefined, call_id: undefined, address: undefined, switch: undefined,
    });
    const f = toFilters({
      since: '2026-01-01T10:00', until: '', state: 'ended', offloaded: 'false', mos_min: '1.5', mos_max: 'x',
      loss_min: '2.5', jitter_min: '30', call_id: ' abc ', address: '198.18.1.10', switch: 'sw1',
    });
    expect(f.started_from).toBe(new Date('2026-01-01T10:00').toISOString());
    expect(f).toMatchObject({ state: ['ended'], offloaded: false, mos_min: 1.5, mos_max: undefined, loss_min: 2.5, jitter_min: 30, call_id: 'abc', address: '198.18.1.10', switch: 'sw1' });
    expect(f.prefix).toBeUndefined();
  });
  it('sends an address with a length as a prefix, IPv6 as typed', () => {
    const base = {
      since: '', until: '', state: '', offloaded: '', mos_min: '', mos_max: '', loss_min: '', jitter_min: '', call_id: '', switch: '',
    } as const;
    expect(toFilters({ ...base, address: ' fd00::/8 ' })).toMatchObject({ prefix: 'fd00::/8', address: undefined });
    expect(toFilters({ ...base, address: 'fd00:198:18:1::10' })).toMatchObject({ address: 'fd00:198:18:1::10', prefix: undefined });
  });
});
