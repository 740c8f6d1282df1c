import { NavLink, Outlet } from 'react-router';
import { Suspense } from 'react';
import { useAuth } from '../api/auth';
import { SummaryBar } from './SummaryBar';
import { ThemeToggle } from './theme';

export function Layout() {
  const { me, logout } = useAuth();
  return (
    <div className="shell">
      <a className="skip-link" href="#main">Skip to content</a>
      <header className="topbar" data-testid="topbar">
        <NavLink to="/" className="brand">p4relay</NavLink>
        <nav className="nav" aria-label="Main">
          <NavLink to="/" end>Overview</NavLink>
          <NavLink to="/live">Live</NavLink>
          <NavLink to="/switches">Switches</NavLink>
          <NavLink to="/events">Events</NavLink>
          <NavLink to="/audit">Audit</NavLink>
          {me?.role === 'admin' && <NavLink to="/admin">Users &amp; tokens</NavLink>}
        </nav>
        <SummaryBar />
        <div className="tools">
          <ThemeToggle />
          <span className="muted who" title={me?.name}>{me?.name}{me?.role ? ` (${me.role})` : ''}</span>
          <button type="button" onClick={logout}>Log out</button>
        </div>
      </header>
      <main className="main" id="main">
        <Suspense fallback={<p className="muted">Loading…</p>}>
          <Outlet />
        </Suspense>
      </main>
    </div>
  );
}
