import { lazy, type ReactNode } from 'react';
import { createBrowserRouter, Navigate, RouterProvider, useLocation } from 'react-router';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { AuthProvider, useAuth } from './api/auth';
import { ApiError } from './api/http';
import { LiveProvider } from './api/live';
import { Layout } from './components/Layout';
import { RouteError } from './components/RouteError';
import { ThemeProvider } from './components/theme';
import LoginPage from './pages/LoginPage';
import LiveSessionsPage from './pages/LiveSessionsPage';

// Pages beyond the first screen load on demand (keeps ECharts out of the entry bundle).
const SessionDetailPage = lazy(() => import('./pages/SessionDetailPage'));
const SwitchesPage = lazy(() => import('./pages/SwitchesPage'));
const EventsPage = lazy(() => import('./pages/EventsPage'));
const AuditPage = lazy(() => import('./pages/AuditPage'));
const AdminPage = lazy(() => import('./pages/AdminPage'));
const OverviewPage = lazy(() => import('./pages/OverviewPage'));

function RequireAuth({ children }: { children: ReactNode }) {
  const { token } = useAuth();
  const location = useLocation();
  if (!token) return <Navigate to="/login" replace state={{ from: location.pathname + location.search }} />;
  return <LiveProvider>{children}</LiveProvider>;
}

function NotFound() {
  return <p className="error" role="alert">No such page.</p>;
}

export const routes = [
  { path: '/login', element: <LoginPage />, errorElement: <RouteError /> },
  {
    path: '/',
    element: <RequireAuth><Layout /></RequireAuth>,
    errorElement: <RouteError />,
    children: [
      {
        errorElement: <RouteError />,
        children: [
          { index: true, element: <OverviewPage /> },
          { path: 'live', element: <LiveSessionsPage /> },
          { path: 'sessions/:id', element: <SessionDetailPage /> },
          { path: 'switches', element: <SwitchesPage /> },
          { path: 'events', element: <EventsPage /> },
          { path: 'audit', element: <AuditPage /> },
          { path: 'admin', element: <AdminPage /> },
          { path: '*', element: <NotFound /> },
        ],
      },
    ],
  },
];

export function makeQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: {
      queries: {
        staleTime: 1000,
        refetchOnWindowFocus: false,
        // Client errors (4xx) will not fix themselves; retry only network/5xx.
        retry: (n, err) => n < 2 && !(err instanceof ApiError && err.status >= 400 && err.status < 500),
      },
    },
  });
}

export function Providers({ client, children }: { client: QueryClient; children: ReactNode }) {
  return (
    <ThemeProvider>
      <QueryClientProvider client={client}>
        <AuthProvider>{children}</AuthProvider>
      </QueryClientProvider>
    </ThemeProvider>
  );
}

const router = createBrowserRouter(routes);
const queryClient = makeQueryClient();

export default function App() {
  return (
    <Providers client={queryClient}>
      <RouterProvider router={router} />
    </Providers>
  );
}
