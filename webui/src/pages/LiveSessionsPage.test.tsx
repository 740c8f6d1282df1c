import { act, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import LiveSessionsPage from './LiveSessionsPage';
import { renderWithLive } from '../test/render';
import { makeSession } from '../test/fixtures';

// The text filter is a deferred value: the count follows the typed text a
// render later (on a busy host, many), so a test waits for it.
describe('LiveSessionsPage', () => {
  it('renders 5,000 live sessions with only the visible rows in the DOM', () => {
    const { store } = renderWithLive(<LiveSessionsPage />);
    act(() => {
      store.replaceAll(Array.from({ length: 5000 }, (_, i) => makeSession(i + 1)));
      store.flush();
    });
    expect(screen.getByTestId('live-count')).toHaveTextContent('5000 of 5000 sessions');
    const rows = screen.getAllByTestId('row');
    expect(rows.length).toBeGreaterThan(5);
    expect(rows.length).toBeLessThan(100);
    expect(screen.getByRole('table', { name: 'Live sessions' })).toHaveAttribute('aria-rowcount', '5001');
  });

  it('shows a new session delivered by the feed', () => {
    const { store } = renderWithLive(<LiveSessionsPage />);
    act(() => {
      store.replaceAll([makeSession(1)]);
      store.flush();
    });
    act(() => {
      store.upsert(makeSession(2, { call_id: 'brand-new@uac' }));
      store.flush();
    });
    expect(screen.getByText('brand-new@uac')).toBeInTheDocument();
    expect(screen.getByTestId('live-count')).toHaveTextContent('2 of 2');
  });

  it('shows caller and callee endpoints and running counters, and finds a call by party', async () => {
    const user = userEvent.setup();
    const { store } = renderWithLive(<LiveSessionsPage />);
    act(() => {
      store.replaceAll([
        makeSession(1, { caller: '198.18.1.21:6000', callee: '198.18.2.22:7000', packets: 4950, lost: 50 }),
        makeSession(2, { caller: '[2001:db8::5]:6002', callee: null }),
      ]);
      store.flush();
    });
    const headers = screen.getAllByRole('columnheader').map((h) => h.textContent);
    // Quality right after the call-id: in view on a 1280 px wall screen.
    expect(headers.slice(0, 4).map((h) => h.replace(/[↑↓↕▲▼]/g, '').trim())).toEqual(['Call-ID', 'Duration', 'MOS', 'Loss']);
    const row1 = screen.getAllByTestId('row').find((r) => within(r).queryByText('198.18.1.21:6000'));
    expect(row1).toBeDefined();
    if (!row1) return;
    expect(within(row1).getByText('198.18.2.22:7000')).toBeInTheDocument();
    expect(within(row1).getByText('1.00 %')).toBeInTheDocument();
    expect(within(row1).getByText('4950')).toBeInTheDocument();
    expect(screen.getByText('[2001:db8::5]:6002')).toBeInTheDocument();
    await user.type(screen.getByLabelText('Filter sessions'), '198.18.2.22');
    await waitFor(() => { expect(screen.getByTestId('live-count')).toHaveTextContent('1 of 2'); });
  });

  it('finds IPv6 parties by any spelling of their address or by a prefix, and sorts parties by address', async () => {
    const user = userEvent.setup();
    const { store } = renderWithLive(<LiveSessionsPage />);
    act(() => {
      store.replaceAll([
        makeSession(1, { caller: '[fd00:198:18:1::10]:6000', callee: '[fd00:198:18:2::10]:7000' }),
        makeSession(2, { caller: '198.18.1.10:6000', callee: '[fd00:198:18:2::10]:7002' }),
        makeSession(3, { caller: '198.18.1.9:6000', callee: '198.18.2.10:7000' }),
        makeSession(4, { caller: '[2001:db8:1234:5678:9abc:def0:1234:5678]:65535', callee: '198.18.2.10:7002' }),
      ]);
      store.flush();
    });
    // A long IPv6 endpoint fits its column; the whole of it is in the tooltip.
    const long = screen.getByTitle('[2001:db8:1234:5678:9abc:def0:1234:5678]:65535');
    expect(long.textContent).toContain('…');
    const filter = screen.getByLabelText('Filter sessions');
    await user.type(filter, 'fd00:198:18:1:0:0:0:10');
    await waitFor(() => { expect(screen.getByTestId('live-count')).toHaveTextContent('1 of 4'); });
    await user.clear(filter);
    await user.type(filter, 'fd00::/8');
    await waitFor(() => { expect(screen.getByTestId('live-count')).toHaveTextContent('2 of 4'); });
    await user.clear(filter);
    await user.type(filter, '198.18.1.0/24');
    await waitFor(() => { expect(screen.getByTestId('live-count')).toHaveTextContent('2 of 4'); });
    await user.clear(filter);
    await waitFor(() => { expect(screen.getByTestId('live-count')).toHaveTextContent('4 of 4'); });
    await user.click(screen.getByRole('button', { name: /^Caller/ }));
    const callers = screen.getAllByTestId('row').map((r) => within(r).getAllByTitle(/:\d+$/)[0]?.getAttribute('title'));
    expect(callers).toEqual([
      '198.18.1.9:6000', '198.18.1.10:6000', '[2001:db8:1234:5678:9abc:def0:1234:5678]:65535', '[fd00:198:18:1::10]:6000',
    ]);
  });

  it('rates a one-way call as no media, and clears it when the stream says it flows again', () => {
    const { store } = renderWithLive(<LiveSessionsPage />);
    const quiet = makeSession(1, { call_id: 'quiet@x', mos_avg: 4.41 });
    act(() => {
      store.replaceAll([quiet]);
      store.upsert({ ...quiet, one_way: 'callee_to_caller' });
      store.flush();
    });
    const row = screen.getAllByTestId('row')[0];
    expect(row).toBeDefined();
    if (!row) return;
    expect(within(row).getByText('no media')).toHaveAttribute('title', 'no media callee → caller');
    expect(within(row).queryByText('4.41')).toBeNull();
    act(() => {
      store.upsert({ ...quiet, one_way: null });
      store.flush();
    });
    expect(screen.queryByText('no media')).toBeNull();
  });

  it('filters by text, relay and degraded MOS', async () => {
    const user = userEvent.setup();
    const { store } = renderWithLive(<LiveSessionsPage />);
    act(() => {
      store.replaceAll([
        makeSession(1, { call_id: 'alpha@x', offloaded: true, mos_avg: 4.3 }),
        makeSession(2, { call_id: 'beta@x', offloaded: false, offload_reason: 'table full', mos_avg: 3.2 }),
        makeSession(3, { call_id: 'gamma@x', offloaded: true, mos_avg: 2.9 }),
      ]);
      store.flush();
    });
    await user.type(screen.getByLabelText('Filter sessions'), 'beta');
    await waitFor(() => { expect(screen.getByTestId('live-count')).toHaveTextContent('1 of 3'); });
    expect(screen.getByText('RTPProxy (table full)')).toBeInTheDocument();
    await user.clear(screen.getByLabelText('Filter sessions'));
    await user.selectOptions(screen.getByLabelText('Relayed by'), 'switch');
    await waitFor(() => { expect(screen.getByTestId('live-count')).toHaveTextContent('2 of 3'); });
    await user.click(screen.getByLabelText('MOS < 3.6 only'));
    expect(screen.getByTestId('live-count')).toHaveTextContent('1 of 3');
    expect(screen.getByText('gamma@x')).toBeInTheDocument();
  });

  it('sorts by MOS when the header is activated from the keyboard', async () => {
    const user = userEvent.setup();
    const { store } = renderWithLive(<LiveSessionsPage />);
    act(() => {
      store.replaceAll([makeSession(1, { mos_avg: 4.1 }), makeSession(2, { mos_avg: 2.5 }), makeSession(3, { mos_avg: 3.7 })]);
      store.flush();
    });
    const button = screen.getByRole('button', { name: /MOS/ });
    button.focus();
    await user.keyboard('{Enter}');
    const header = screen.getByRole('columnheader', { name: /MOS/ });
    const order = () => screen.getAllByTestId('row').map((r) => within(r).getAllByRole('cell')[2]?.textContent);
    const first = order();
    expect(header).toHaveAttribute('aria-sort');
    expect([first[0], first[2]].map((t) => t?.slice(0, 4)).sort()).toEqual(['2.50', '4.10']);
  });
});
