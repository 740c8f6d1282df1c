import { useState, type SyntheticEvent } from 'react';
import { Navigate, useLocation } from 'react-router';
import { useAuth } from '../api/auth';
import { ThemeToggle } from '../components/theme';

export default function LoginPage() {
  const { token, login } = useAuth();
  const location = useLocation();
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const from = (location.state as { from?: string } | null)?.from ?? '/';

  if (token) return <Navigate to={from} replace />;

  const submit = (e: SyntheticEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    login(username, password).then(
      () => { setBusy(false); },
      (err: unknown) => {
        setBusy(false);
        setError(err instanceof Error ? err.message : String(err));
      },
    );
  };

  return (
    <div className="login">
      <form className="card" onSubmit={submit} aria-labelledby="login-title">
        <h1 id="login-title">p4relay console</h1>
        <label className="field">
          Username
          <input autoComplete="username" value={username} onChange={(e) => { setUsername(e.target.value); }} required />
        </label>
        <label className="field">
          Password
          <input type="password" autoComplete="current-password" value={password}
            onChange={(e) => { setPassword(e.target.value); }} required />
        </label>
        {error && <p className="error" role="alert">{error}</p>}
        <button className="primary" type="submit" disabled={busy}>{busy ? 'Signing in…' : 'Sign in'}</button>
        <div><ThemeToggle /></div>
      </form>
    </div>
  );
}
