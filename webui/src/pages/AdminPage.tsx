import { useState, type SyntheticEvent } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useAuth } from '../api/auth';
import { api } from '../api/endpoints';
import type { CreatedToken, Role, Scope } from '../api/types';
import { ScrollRegion } from '../components/ScrollRegion';
import { formatTime } from '../lib/format';

function Users() {
  const qc = useQueryClient();
  const { me } = useAuth();
  const users = useQuery({ queryKey: ['users'], queryFn: api.users });
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const create = useMutation({
    mutationFn: () => api.createUser(username, password, role),
    onSuccess: () => {
      setUsername('');
      setPassword('');
      void qc.invalidateQueries({ queryKey: ['users'] });
    },
  });
  const update = useMutation({
    mutationFn: (v: { id: number; role?: Role; disabled?: boolean }) => api.updateUser(v.id, { role: v.role, disabled: v.disabled }),
    onSuccess: () => { void qc.invalidateQueries({ queryKey: ['users'] }); },
  });
  const submit = (e: SyntheticEvent) => {
    e.preventDefault();
    create.mutate();
  };
  return (
    <section className="card" aria-labelledby="users-title">
      <h2 id="users-title">Users</h2>
      {users.isError && <p className="error" role="alert">{users.error.message}</p>}
      <ScrollRegion label="Users (table)">
        <table className="data" aria-label="Users">
          <thead><tr><th scope="col">User</th><th scope="col">Role</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col"><span className="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {users.data?.map((u) => {
              const self = u.username === me?.name;
              return (
                <tr key={u.id}>
                  <td>{u.username}{self ? ' (you)' : ''}</td>
                  <td>
                    <select aria-label={`Role of ${u.username}`} value={u.role} disabled={self}
                      onChange={(e) => { update.mutate({ id: u.id, role: e.target.value as Role }); }}>
                      <option value="viewer">viewer</option>
                      <option value="admin">admin</option>
                    </select>
                  </td>
                  <td>{u.disabled ? 'disabled' : 'active'}</td>
                  <td>{formatTime(u.created_at)}</td>
                  <td>
                    {!self && (
                      <button type="button" className={u.disabled ? undefined : 'danger'}
                        onClick={() => { update.mutate({ id: u.id, disabled: !u.disabled }); }}>
                        {u.disabled ? 'Enable' : 'Disable'}
                      </button>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </ScrollRegion>
      <form className="toolbar" onSubmit={submit} style={{ marginTop: '0.8rem' }} aria-label="Add user">
        <label className="field">Username<input value={username} onChange={(e) => { setUsername(e.target.value); }} required /></label>
        <label className="field">Password<input type="password" autoComplete="new-password" value={password} onChange={(e) => { setPassword(e.target.value); }} required minLength={10} /></label>
        <label className="field">
          Role
          <select value={role} onChange={(e) => { setRole(e.target.value as Role); }}>
            <option value="viewer">viewer</option>
            <option value="admin">admin</option>
          </select>
        </label>
        <button className="primary" type="submit" disabled={create.isPending}>Add user</button>
      </form>
      {create.isError && <p className="error" role="alert">{create.error.message}</p>}
      {update.isError && <p className="error" role="alert">{update.error.message}</p>}
    </section>
  );
}

function Tokens() {
  const qc = useQueryClient();
  const tokens = useQuery({ queryKey: ['tokens'], queryFn: api.tokens });
  const [name, setName] = useState('');
  const [scope, setScope] = useState<Scope>('read');
  const [created, setCreated] = useState<CreatedToken | null>(null);
  const create = useMutation({
    mutationFn: () => api.createToken(name, scope),
    onSuccess: (t) => {
      setCreated(t);
      setName('');
      void qc.invalidateQueries({ queryKey: ['tokens'] });
    },
  });
  const revoke = useMutation({
    mutationFn: api.revokeToken,
    onSuccess: () => { void qc.invalidateQueries({ queryKey: ['tokens'] }); },
  });
  return (
    <section className="card" aria-labelledby="tokens-title">
      <h2 id="tokens-title">API tokens</h2>
      {tokens.isError && <p className="error" role="alert">{tokens.error.message}</p>}
      <ScrollRegion label="API tokens (table)">
        <table className="data" aria-label="API tokens">
          <thead><tr><th scope="col">Name</th><th scope="col">Prefix</th><th scope="col">Scope</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Status</th><th scope="col"><span className="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {tokens.data?.map((t) => (
              <tr key={t.id}>
                <td>{t.name}</td>
                <td><code>{t.prefix}</code></td>
                <td><code>{t.scope}</code></td>
                <td>{formatTime(t.created_at)}</td>
                <td>{formatTime(t.last_used_at)}</td>
                <td>{t.revoked_at ? `revoked ${formatTime(t.revoked_at)}` : t.expires_at ? `expires ${formatTime(t.expires_at)}` : 'active'}</td>
                <td>{!t.revoked_at && <button type="button" className="danger" onClick={() => { revoke.mutate(t.id); }}>Revoke</button>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </ScrollRegion>
      <form className="toolbar" style={{ marginTop: '0.8rem' }} aria-label="Create token"
        onSubmit={(e) => { e.preventDefault(); create.mutate(); }}>
        <label className="field">Name<input value={name} onChange={(e) => { setName(e.target.value); }} required /></label>
        <label className="field">
          Scope
          <select value={scope} onChange={(e) => { setScope(e.target.value as Scope); }}>
            <option value="read">read-only</option>
            <option value="ingest">agent ingest</option>
          </select>
        </label>
        <button className="primary" type="submit" disabled={create.isPending}>Create token</button>
      </form>
      {create.isError && <p className="error" role="alert">{create.error.message}</p>}
      {created && (
        <div className="notice" role="status">
          Token <strong>{created.name}</strong> — copy it now, it is not shown again:
          <pre className="mono" style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}>{created.token}</pre>
        </div>
      )}
    </section>
  );
}

export default function AdminPage() {
  const { me } = useAuth();
  // Wait for who-am-I: a viewer must not even ask for users/tokens (the server would answer 403).
  if (!me) return <p className="muted">Loading…</p>;
  if (me.role !== 'admin') return <p className="error" role="alert">Only administrators manage users and tokens.</p>;
  return (
    <section className="page" aria-labelledby="admin-title">
      <h1 id="admin-title">Users &amp; API tokens</h1>
      <div className="grid-admin">
        <Users />
        <Tokens />
      </div>
    </section>
  );
}
