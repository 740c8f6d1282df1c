// A switch's maintenance state and capacity, with the operator's controls:
// out of service (every call back on RTPProxy, none offloaded) and back, and
// each agent's drain / evacuation. Every action asks for a confirmation first;
// the server checks the role and records who did what (maintenance_set events).
import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api } from '../api/endpoints';
import { useAuth } from '../api/auth';
import type { AgentMaintenance, AgentMode, SwitchMaintenance } from '../api/types';
import { formatCount, formatPercent, formatTime } from '../lib/format';

type Pending =
  | { kind: 'switch'; state: 'active' | 'out_of_service' }
  | { kind: 'agent'; agent: AgentMaintenance; state: AgentMode };

const AGENT_ACTION: Record<AgentMode, string> = {
  draining: 'Drain',
  evacuated: 'Evacuate',
  active: 'Resume',
};

function consequence(p: Pending, sw: SwitchMaintenance): string {
  if (p.kind === 'switch') {
    return p.state === 'out_of_service'
      ? `Take ${sw.name} out of service? Its ${formatCount(sw.offloaded)} offloaded calls move back to RTPProxy and no new call is offloaded to it until it is back in service.`
      : `Put ${sw.name} back in service? Calls are offloaded to it again.`;
  }
  if (p.state === 'draining') {
    return `Drain ${p.agent.name}? New calls stay on RTPProxy; its ${formatCount(p.agent.offloaded ?? 0)} offloaded calls stay on the switch until they end.`;
  }
  if (p.state === 'evacuated') {
    return `Evacuate ${p.agent.name}? Its ${formatCount(p.agent.offloaded ?? 0)} offloaded calls move back to RTPProxy and no new call is offloaded.`;
  }
  return `Resume ${p.agent.name}? Calls are offloaded again.`;
}

export function MaintenancePanel({ switchId }: { switchId: number }) {
  const { me } = useAuth();
  const qc = useQueryClient();
  const q = useQuery({ queryKey: ['maintenance'], queryFn: api.maintenance, refetchInterval: 2000 });
  const [pending, setPending] = useState<Pending | null>(null);
  const act = useMutation({
    mutationFn: async (p: Pending) => {
      if (p.kind === 'switch') await api.setSwitchMaintenance(switchId, { state: p.state, clear_cap: false });
      else await api.setAgentMaintenance(p.agent.id, p.state);
    },
    onSuccess: () => { setPending(null); void qc.invalidateQueries({ queryKey: ['maintenance'] }); },
  });
  const mayAct = me?.kind === 'user' && (me.role === 'operator' || me.role === 'admin');
  const sw = q.data?.switches.find((s) => s.id === switchId);

  if (q.isError) return <p className="error" role="alert">Could not load the maintenance state: {q.error.message}</p>;
  if (!sw) return <p className="muted">No maintenance state reported for this switch yet.</p>;
  const out = sw.maintenance === 'out_of_service';
  const state = out ? (sw.evacuated ? 'out of service (evacuated)' : 'out of service (evacuating)') : 'in service';

  return (
    <div data-testid="maintenance">
      <p style={{ margin: '0.2rem 0' }}>
        <span className={`badge ${out ? 'bad' : 'good'}`} data-testid="switch-maintenance">{state}</span>
        {sw.maintenance_changed_by && (
          <span className="muted"> — set by {sw.maintenance_changed_by}, {formatTime(sw.maintenance_changed_at)}</span>
        )}
      </p>
      <dl className="facts" aria-label="Capacity">
        <dt>Offloaded calls</dt><dd data-testid="offloaded-calls">{formatCount(sw.offloaded)}</dd>
        <dt>Capacity</dt>
        <dd>{sw.capacity == null ? '–' : `${formatCount(sw.capacity)} calls`}{sw.offload_cap != null && ` (cap ${formatCount(sw.offload_cap)})`}</dd>
        <dt>Headroom</dt>
        <dd>{sw.headroom == null ? '–' : `${formatCount(sw.headroom)} calls`}{sw.utilisation != null && ` (${formatPercent(sw.utilisation, 1)} used)`}</dd>
        <dt>By pipe</dt>
        <dd>{Object.keys(sw.by_pipe).length === 0 ? '–' : Object.entries(sw.by_pipe).map(([p, n]) => `pipe ${p}: ${formatCount(n)}`).join(', ')}</dd>
      </dl>
      {sw.utilisation != null && (
        <meter className="occupancy" min={0} max={1} value={sw.utilisation} low={0.8} high={0.95} optimum={0}
          aria-label={`Offload capacity used on ${sw.name}`}>{formatPercent(sw.utilisation, 1)}</meter>
      )}
      {mayAct && (
        <p>
          <button type="button" onClick={() => { act.reset(); setPending({ kind: 'switch', state: out ? 'active' : 'out_of_service' }); }}>
            {out ? 'Return to service' : 'Take out of service'}
          </button>
        </p>
      )}
      <table className="data" aria-label="Agents">
        <thead>
          <tr>
            <th scope="col">Agent</th><th scope="col">Asked</th><th scope="col">Reported</th>
            <th scope="col" className="num">Offloaded</th><th scope="col" className="num">Capacity</th>
            {mayAct && <th scope="col">Action</th>}
          </tr>
        </thead>
        <tbody>
          {sw.agents.map((a) => (
            <tr key={a.id}>
              <td>{a.name}{a.stale && <span className="muted"> (no report)</span>}</td>
              <td>{a.maintenance}</td>
              <td data-testid={`agent-mode-${a.name}`}>{a.reported_mode ?? '–'}</td>
              <td className="num">{a.offloaded == null ? '–' : formatCount(a.offloaded)}</td>
              <td className="num">{a.capacity == null ? '–' : formatCount(a.capacity)}</td>
              {mayAct && (
                <td className="nowrap">
                  {(['draining', 'evacuated', 'active'] as const).filter((m) => m !== a.maintenance).map((m) => (
                    <button key={m} type="button" onClick={() => { act.reset(); setPending({ kind: 'agent', agent: a, state: m }); }}>
                      {AGENT_ACTION[m]}
                    </button>
                  ))}
                </td>
              )}
            </tr>
          ))}
          {sw.agents.length === 0 && <tr><td colSpan={mayAct ? 6 : 5} className="muted">No agent reports for this switch.</td></tr>}
        </tbody>
      </table>
      {pending && (
        <div role="alertdialog" aria-modal="false" aria-labelledby="maint-confirm" className="card">
          <p id="maint-confirm">{consequence(pending, sw)}</p>
          <button type="button" disabled={act.isPending} onClick={() => { act.mutate(pending); }}>Confirm</button>{' '}
          <button type="button" onClick={() => { setPending(null); }}>Cancel</button>
          {act.isError && <p className="error" role="alert">Refused: {act.error.message}</p>}
        </div>
      )}
    </div>
  );
}
