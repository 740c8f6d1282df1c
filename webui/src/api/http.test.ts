import { describe, expect, it } from 'vitest';
import { errorMessage } from './http';

describe('errorMessage', () => {
  it('passes a plain detail through', () => {
    expect(errorMessage({ detail: 'wrong username or password' }, 'x')).toBe('wrong username or password');
  });
  it('names the field and hides pydantic union internals', () => {
    const body = {
      detail: [
        { loc: ['query', 'address', 'lax-or-strict[lax=function-plain[ip_v4_address_validator()],strict=…]'], msg: 'Input is not a valid IPv4 address', type: 'ip_v4_address' },
        { loc: ['query', 'address', 'lax-or-strict[lax=function-plain[ip_v6_address_validator()],strict=…]'], msg: 'Input is not a valid IPv6 address', type: 'ip_v6_address' },
        { loc: ['body', 'password'], msg: 'String should have at least 10 characters', type: 'string_too_short' },
      ],
    };
    expect(errorMessage(body, 'x')).toBe(
      'query.address: Input is not a valid IPv4 address or Input is not a valid IPv6 address; password: String should have at least 10 characters',
    );
  });
  it('falls back when the body is not FastAPI-shaped', () => {
    expect(errorMessage(null, '502 Bad Gateway')).toBe('502 Bad Gateway');
    expect(errorMessage({ error: 1 }, '500')).toBe('500');
  });
});
