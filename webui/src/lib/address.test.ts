import { describe, expect, it } from 'vitest';
import { compareEndpoints, fitEndpoint, inPrefix, parseEndpoint, parseIp, parsePrefix } from './address';

describe('parseIp', () => {
  it('reads every spelling of an IPv6 address as one value', () => {
    const a = parseIp('fd00:198:18:1::10');
    expect(a?.version).toBe(6);
    expect(parseIp('FD00:198:18:1:0:0:0:10')).toEqual(a);
    expect(parseIp('fd00:0198:0018:0001:0000:0000:0000:0010')).toEqual(a);
    expect(parseIp('::')).toEqual({ version: 6, value: 0n });
    expect(parseIp('::1')).toEqual({ version: 6, value: 1n });
    expect(parseIp('::ffff:198.18.1.10')?.value).toBe(0xffffc612010an);
  });
  it('reads IPv4', () => {
    expect(parseIp('198.18.1.10')).toEqual({ version: 4, value: 0xc612010an });
  });
  it.each(['', '198.18.1', '198.18.1.256', '01.2.3.4', '1::2::3', '1:2:3:4:5:6:7:8:9', '12345::', 'fe80::1%eth0',
    'g::1', '1:2:3:4:5:6:7::8:9', 'localhost'])('refuses %j', (text) => {
    expect(parseIp(text)).toBeNull();
  });
});

describe('prefixes', () => {
  /** Is `addr` inside `prefix` (both must parse)? */
  function within(addr: string, prefix: string): boolean {
    const ip = parseIp(addr);
    const p = parsePrefix(prefix);
    if (ip === null || p === null) throw new Error(`${addr} or ${prefix} does not parse`);
    return inPrefix(ip, p);
  }
  it('matches addresses of their own family only', () => {
    expect(within('fd00:198:18:2::10', 'fd00::/8')).toBe(true);
    expect(within('2001:db8::1', 'fd00::/8')).toBe(false);
    expect(within('198.18.1.10', 'fd00::/8')).toBe(false);
  });
  it('ignores host bits and takes a bare address as one host', () => {
    expect(parsePrefix('198.18.1.77/24')).toEqual({ version: 4, value: 0xc6120100n, length: 24 });
    expect(within('198.18.1.10', '198.18.1.10')).toBe(true);
    expect(within('198.18.1.11', '198.18.1.10')).toBe(false);
    expect(within('2001:db8::1', '::/0')).toBe(true);
  });
  it.each(['fd00::/129', '10.0.0.0/33', '10.0.0.0/', '10.0.0.0/8/8', 'fd00::/x'])('refuses %j', (text) => {
    expect(parsePrefix(text)).toBeNull();
  });
});

describe('endpoints', () => {
  it('parses the server forms', () => {
    expect(parseEndpoint('[fd00::10]:20000')).toEqual({ ip: { version: 6, value: 0xfd000000000000000000000000000010n }, port: 20000 });
    expect(parseEndpoint('198.18.1.10:4000')?.port).toBe(4000);
    expect(parseEndpoint('fd00::10:4000')).toBeNull(); // an IPv6 endpoint always has brackets
    expect(parseEndpoint('[fd00::10]:70000')).toBeNull();
    expect(parseEndpoint('–')).toBeNull();
    expect(parseEndpoint(null)).toBeNull();
  });
  it('sorts IPv4 numerically, then IPv6, then what does not parse', () => {
    const sorted = ['–', '[fd00::2]:1', '198.18.1.10:5', '[2001:db8::1]:9', '198.18.1.9:7', '198.18.1.9:5']
      .sort(compareEndpoints);
    expect(sorted).toEqual(['198.18.1.9:5', '198.18.1.9:7', '198.18.1.10:5', '[2001:db8::1]:9', '[fd00::2]:1', '–']);
  });
  it('fits a long IPv6 endpoint by cutting the middle of the address', () => {
    const long = '[2001:db8:1234:5678:9abc:def0:1234:5678]:65535';
    const fit = fitEndpoint(long, 28);
    expect(fit).toHaveLength(28);
    expect(fit.startsWith('[2001:db8')).toBe(true);
    expect(fit.endsWith(':5678]:65535')).toBe(true);
    expect(fitEndpoint('[fd00:198:18:2::10]:20000', 28)).toBe('[fd00:198:18:2::10]:20000');
    expect(fitEndpoint('198.18.1.10:4000', 10)).toBe('198.18.1.10:4000');
  });
});
